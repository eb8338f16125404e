package cli

import (
	"context"
	"os"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/adapter/runscexec"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/runscflags"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// execPathEnv set to "podman" makes exec and shell run the command with
// podman exec even where runsc exec would do (for comparing the two,
// bench/lifecycle; both give the command the same process).
const execPathEnv = "LAZARET_EXEC_PATH"

// isolationCaps are the capabilities the isolating session holder needs
// beyond the container's (podman exec gets every one with --privileged).
func isolationCaps(o podman.ExecOptions) []string {
	if !o.Privileged {
		return nil
	}
	return escprompt.IsolationCaps
}

// directExec prepares the session's command as a runsc exec of the agent
// container (internal/adapter/runscexec: the process podman exec would start,
// without podman's and conmon's start, about 120 ms here). nil means
// podman exec: an older coordinator (no container ID), a user other than
// the container's, a runsc or a container state this process cannot read
// (another runtime), each logged.
func (s *session) directExec(spec ctl.ExecSpec, o podman.ExecOptions) *runscexec.Exec {
	if os.Getenv(execPathEnv) == "podman" || spec.ContainerID == "" || o.User != "" {
		return nil
	}
	runsc, err := locate.Find(locate.Runsc)
	if err != nil {
		s.g.log.Debug("runsc exec not possible; using podman exec", "err", err)
		return nil
	}
	c, err := runscexec.Load(runscexec.DefaultRoot(os.Getenv("XDG_RUNTIME_DIR")), spec.ContainerID)
	if err != nil {
		s.g.log.Debug("runsc exec not possible; using podman exec", "err", err)
		return nil
	}
	// Not tied to a context: SIGINT is for the command, not for lazaret.
	d, err := c.Command(context.Background(), runsc, runscflags.Global(runscflags.DetectPlatform()),
		runscexec.Options{Command: o.Command, Env: o.Env, Workdir: o.Workdir, TTY: o.TTY, ExtraCaps: isolationCaps(o)}, s.extraFiles())
	if err != nil {
		s.g.log.Debug("runsc exec not possible; using podman exec", "err", err)
		return nil
	}
	s.g.log.Debug("runsc exec", "container", spec.ContainerID, "args", d.Cmd.Args)
	return d
}
