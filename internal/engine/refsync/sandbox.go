package refsync

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"

	"github.com/lazaret-dev/lazaret/internal/execx"
)

// Sandbox starts a command in the sandbox the branches come from, its
// standard streams piped: `podman exec` locally, the API server's exec on
// Kubernetes. Everything that comes back is parsed as hostile.
type Sandbox interface {
	// Start runs argv in the sandbox's workspace container; cancelling
	// ctx ends it.
	Start(ctx context.Context, argv []string) (*Proc, error)
	// Name names the sandbox in the audit trail and in host reflogs.
	Name() string
}

// Proc is a started command in the sandbox.
type Proc struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Stderr *execx.TailBuffer // the end of its standard error
	Wait   func() error      // after Stdout is drained
}

// sandboxName names the sandbox in reflogs and audit entries.
func (s *Syncer) sandboxName() string {
	if s.Sandbox == nil {
		return "sandbox"
	}
	return s.Sandbox.Name()
}

// StartCmd starts cmd (a local process: podman exec, or a test's shell)
// with its streams piped as a Proc.
func StartCmd(cmd *exec.Cmd) (*Proc, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	tail := &execx.TailBuffer{Max: 64 << 10}
	cmd.Stderr = tail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(cmd.Path), err)
	}
	return &Proc{Stdin: stdin, Stdout: stdout, Stderr: tail, Wait: cmd.Wait}, nil
}
