// Package podman is the only package that runs podman. It builds argument
// vectors, decodes `--format json` output into typed values and maps podman's
// exit codes (125, 126, 127) to typed errors.
package podman

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/execx"
)

// Exit codes podman uses for its own failures, as opposed to the
// container command's.
const (
	ExitPodmanError   = 125 // podman itself failed
	ExitCannotInvoke  = 126 // the contained command cannot be invoked
	ExitCommandNotFnd = 127 // the contained command was not found
)

// Sentinel errors that an *Error unwraps to, by exit code.
var (
	ErrPodman          = errors.New("podman failed")
	ErrCannotInvoke    = errors.New("command cannot be invoked in the container")
	ErrCommandNotFound = errors.New("command not found in the container")
	ErrNoSuchContainer = errors.New("no such container")
	ErrNoSuchImage     = errors.New("no such image")
	ErrNotInstalled    = errors.New("podman is not installed")
	// ErrUserNamespaceLost is rootless podman's lost user namespace: its pause
	// process and every container's conmon were killed (a logout, an OOM
	// kill), and each podman command fails until `podman system migrate`.
	ErrUserNamespaceLost = errors.New("rootless podman lost its user namespace")
	// ErrBadOutput is output lazaret cannot decode (an unknown podman).
	ErrBadOutput = errors.New("unexpected podman output")
)

// Error is a failed podman invocation.
type Error struct{ execx.Failure }

// Error names podman's subcommand, the first argument.
func (e *Error) Error() string {
	verb := ""
	if len(e.Args) > 0 {
		verb = e.Args[0]
	}
	return e.Message("podman", verb)
}

// Unwrap maps the exit code and well-known messages to sentinel errors.
func (e *Error) Unwrap() []error {
	var errs []error
	switch e.ExitCode {
	case ExitPodmanError:
		errs = append(errs, ErrPodman)
	case ExitCannotInvoke:
		errs = append(errs, ErrCannotInvoke)
	case ExitCommandNotFnd:
		errs = append(errs, ErrCommandNotFound)
	}
	low := strings.ToLower(e.Stderr)
	if strings.Contains(low, "no such container") || strings.Contains(low, "no container with name or id") {
		errs = append(errs, ErrNoSuchContainer)
	}
	if strings.Contains(low, "image not known") || strings.Contains(low, "no such image") {
		errs = append(errs, ErrNoSuchImage)
	}
	if strings.Contains(low, "podman system migrate") {
		errs = append(errs, ErrUserNamespaceLost)
	}
	return errs
}

// DefaultBin is the podman executable looked up on PATH.
const DefaultBin = "podman"

// Client runs podman. The zero value runs "podman" from PATH with the
// process environment.
type Client struct {
	// Bin is the podman executable; "podman" when empty.
	Bin string
	// Runtime, when set, is passed as --runtime to commands that create
	// containers (the lazaret-runsc shim).
	Runtime string
	// Env replaces the environment of podman when non-nil.
	Env []string
	Log *slog.Logger
}

func (c *Client) bin() string {
	if c.Bin != "" {
		return c.Bin
	}
	return DefaultBin
}

func (c *Client) logger() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.New(slog.DiscardHandler)
}

// command returns an *exec.Cmd for podman with args. No descriptors other
// than the ones the caller sets are inherited: exec.Cmd passes on every
// descriptor not marked close-on-exec, and lazaret marks all it inherited
// at start (internal/fdsafe).
func (c *Client) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.bin(), args...)
	if c.Env != nil {
		cmd.Env = c.Env
	}
	c.logger().Debug("podman", "args", args)
	return cmd
}

// outputArgs runs podman with args and returns its stdout. A non-zero exit
// is an *Error carrying stderr.
func (c *Client) outputArgs(ctx context.Context, args ...string) ([]byte, error) {
	return c.output(c.command(ctx, args...), nil, args)
}

// OutputInvocation is Output for an Invocation (its environment beside
// the argv).
func (c *Client) OutputInvocation(ctx context.Context, inv *Invocation) ([]byte, error) {
	cmd, err := c.Cmd(ctx, inv)
	if err != nil {
		return nil, err
	}
	return c.output(cmd, nil, inv.Args)
}

func (c *Client) output(cmd *exec.Cmd, r io.Reader, args []string) ([]byte, error) {
	stdout, stderr, err := execx.Output(cmd, r)
	return stdout, c.wrap(args, err, stderr)
}

// run runs podman with args, discarding stdout.
func (c *Client) run(ctx context.Context, args ...string) error {
	_, err := c.outputArgs(ctx, args...)
	return err
}

func (c *Client) wrap(args []string, err error, stderr string) error {
	exited := func(code int) error { return &Error{execx.Failure{Args: args, ExitCode: code, Stderr: stderr}} }
	missing := fmt.Errorf("%w (%s)", ErrNotInstalled, c.bin())
	return execx.Wrap(err, exited, missing, "podman "+strings.Join(args, " "))
}
