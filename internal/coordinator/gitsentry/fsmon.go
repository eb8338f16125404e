package gitsentry

import (
	"context"
	"fmt"
	"strconv"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/wire/fsmonproto"
)

// The fsmonitor in the sandbox (branch mode only; docs/GITSENTRY.md,
// "fsmonitor"): the lazaret-fsmonitor binary read-only, and a tmpfs for
// its socket, fresh at every start.
const (
	ContainerFSMonitorBin = "/run/lazaret/gitsentry/lazaret-fsmonitor"
	ContainerFSMonitorDir = "/run/lazaret/fsmonitor"
)

// FSMonitorMounts are the fsmonitor's mounts for the binary at bin.
func FSMonitorMounts(bin string) []podman.Mount {
	return []podman.Mount{
		{Type: "bind", Source: bin, Target: ContainerFSMonitorBin, ReadOnly: true},
		{Type: "tmpfs", Target: ContainerFSMonitorDir, Options: []string{"tmpfs-size=64k", "tmpfs-mode=755"}},
	}
}

// AddGitConfigEnv appends key=value pairs to the command-line-level git
// config of the sandbox (GIT_CONFIG_COUNT/KEY_n/VALUE_n), after whatever
// is there already. An unreadable GIT_CONFIG_COUNT (the profile set its
// own) is an error: the pairs would be misnumbered.
func AddGitConfigEnv(env map[string]string, kv ...string) error {
	if len(kv)%2 != 0 {
		return fmt.Errorf("AddGitConfigEnv: odd number of arguments")
	}
	n := 0
	if s, ok := env["GIT_CONFIG_COUNT"]; ok {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > 1000 {
			return fmt.Errorf("GIT_CONFIG_COUNT=%q is not a count", s)
		}
		n = v
	}
	for i := 0; i < len(kv); i += 2 {
		env[fmt.Sprintf("GIT_CONFIG_KEY_%d", n)] = kv[i]
		env[fmt.Sprintf("GIT_CONFIG_VALUE_%d", n)] = kv[i+1]
		n++
	}
	env["GIT_CONFIG_COUNT"] = strconv.Itoa(n)
	return nil
}

// FSMonitorGitConfig is the git configuration that makes git in the
// sandbox ask the fsmonitor. Hook version 2 is set explicitly: with it
// unset, git 2.39 retries a failed query with protocol 1.
func FSMonitorGitConfig() []string {
	return []string{
		"core.fsmonitor", ContainerFSMonitorBin,
		"core.fsmonitorHookVersion", fsmonproto.HookVersion,
	}
}

// prepareFSMonitor adds the fsmonitor to a branch-mode spec. Without the
// binary (an install that lacks it) git simply scans, as before.
func (c *Component) prepareFSMonitor(spec *podman.ContainerSpec) {
	if c.NoFSMonitor {
		return
	}
	bin := c.FSMonitor
	if bin == "" {
		b, err := locate.Find(locate.FSMonitor)
		if err != nil {
			c.logger().Warn("gitsentry: no fsmonitor, git status scans the whole clone", "err", err)
			return
		}
		bin = b
	}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	if err := AddGitConfigEnv(spec.Env, FSMonitorGitConfig()...); err != nil {
		c.logger().Warn("gitsentry: no fsmonitor", "err", err)
		return
	}
	spec.Mounts = append(spec.Mounts, FSMonitorMounts(bin)...)
	c.fsmonitor = true
}

// StartFSMonitor starts the fsmonitor daemon in the running container.
// It runs detached for the container's life; until it listens (it first
// watches every directory), and if it dies, the hook answers "/" and git
// scans everything.
func StartFSMonitor(ctx context.Context, pc *podman.Client, container string) error {
	return pc.ExecDetached(ctx, container, ContainerFSMonitorBin, "daemon",
		"--root", ContainerWorkspace, "--socket", fsmonproto.Socket)
}
