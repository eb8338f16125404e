// Package userns runs a command as uid 0 of rootless podman's user
// namespace, in podman's mount namespace: where podman keeps its mounts
// (image mounts, container root filesystems, the State Anchor's overlays)
// and the pinned network namespaces, which a mount made anywhere else is
// invisible to. It is the one package that runs nsenter into podman's
// namespaces; its callers are the adapters of what runs there (netns,
// overlayfs) and the State Anchor's fold, lazaret's own binary.
package userns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/execx"
)

// Runner enters podman's namespaces for Podman's user.
type Runner struct {
	Podman *podman.Client
}

// New is the Runner of pc.
func New(pc *podman.Client) Runner { return Runner{Podman: pc} }

func (r Runner) logger() *slog.Logger {
	if r.Podman.Log != nil {
		return r.Podman.Log
	}
	return slog.New(slog.DiscardHandler)
}

// pause is the pid of podman's pause process when nsenter may join it:
// alive, and the real podman (a test's fake podman has no namespaces to
// join).
func (r Runner) pause() (int, bool) {
	pid, ok := r.Podman.PauseProcess()
	return pid, ok && r.Podman.Bin == ""
}

// Run runs argv as uid 0 of the rootless user namespace, in podman's mount
// namespace, and returns its stdout. When podman's pause process is alive
// it joins that process's namespaces directly with nsenter (about 4 ms,
// measured) instead of starting podman (about 50 ms, on the cold start's
// critical path); otherwise it runs `podman unshare`, which also starts
// the pause process. Only stdin/stdout/stderr reach argv; podman may add
// descriptors of its own (it passes a pipe at fd 251), so argv that
// daemonizes must close them. A failure of argv is a *podman.Error of
// `unshare` either way.
func (r Runner) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("podman unshare: no command")
	}
	if pid, ok := r.pause(); ok {
		out, err := r.nsenter(ctx, pid, argv)
		if !errors.Is(err, errNsenterUnusable) {
			return out, err
		}
		r.logger().Debug("nsenter into podman's pause process failed; using podman unshare", "pid", pid, "err", err)
	}
	return r.Podman.Unshare(ctx, argv...)
}

// Mountinfo returns the mount table of podman's mount namespace, as
// `cat /proc/self/mountinfo` run through Run prints it. With the pause
// process alive it reads that process's own mountinfo (the same namespace
// and root) and starts nothing: on a small machine a process start is
// several milliseconds of the cold start's critical path.
func (r Runner) Mountinfo(ctx context.Context) ([]byte, error) {
	if pid, ok := r.pause(); ok {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
		// Checked again after the read: a pid that no longer names the
		// pause process may have been reused by anything.
		if again, ok := r.pause(); err == nil && ok && again == pid {
			return b, nil
		}
		r.logger().Debug("reading the pause process's mountinfo failed; using unshare", "pid", pid, "err", err)
	}
	return r.Run(ctx, "cat", "/proc/self/mountinfo")
}

// JoinCommand is argv run in the user and mount namespaces of podman's
// pause process (with podman's environment), for a process that outlives
// the call (netns's slirp4netns); false when no pause process runs.
func (r Runner) JoinCommand(argv ...string) (*exec.Cmd, bool) {
	pid, ok := r.Podman.PauseProcess()
	if !ok {
		return nil, false
	}
	cmd := exec.Command("nsenter", joinArgs(pid, argv)...)
	if r.Podman.Env != nil {
		cmd.Env = r.Podman.Env
	}
	return cmd, true
}

func joinArgs(pid int, argv []string) []string {
	return append([]string{"-U", "-m", "-t", strconv.Itoa(pid), "--"}, argv...)
}

// errNsenterUnusable marks a failure of nsenter itself (not of argv): Run
// then falls back to podman unshare.
var errNsenterUnusable = errors.New("nsenter unusable")

// nsenterFailed is nsenter's own exit status when it cannot join the
// namespaces or exec argv; argv's own exit statuses pass through.
const nsenterFailed = 1

func (r Runner) nsenter(ctx context.Context, pid int, argv []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "nsenter", joinArgs(pid, argv)...)
	if r.Podman.Env != nil {
		cmd.Env = r.Podman.Env
	}
	r.logger().Debug("nsenter", "pid", pid, "args", argv)
	stdout, stderr, err := execx.Output(cmd, nil)
	if err == nil {
		return stdout, nil
	}
	code, ok := execx.ExitCode(err)
	if !ok {
		return nil, fmt.Errorf("%w: %v", errNsenterUnusable, err)
	}
	// nsenter reports its own failures as "nsenter: …" on stderr with
	// status 1; anything else is argv's.
	if code == nsenterFailed && strings.HasPrefix(stderr, "nsenter: ") {
		return nil, fmt.Errorf("%w: %s", errNsenterUnusable, strings.TrimSpace(stderr))
	}
	return stdout, &podman.Error{Failure: execx.Failure{Args: append([]string{"unshare"}, argv...), ExitCode: code, Stderr: stderr}}
}
