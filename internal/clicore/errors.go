package clicore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// UsageError is a bad flag or argument: exit code 2, and a hint naming
// the help of the command it belongs to (UsageHint).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ExitError carries an exit code that must be returned as is, such as the
// exit code of the command run in the sandbox. It prints nothing.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// HintError attaches an exit code and a hint to an error.
type HintError struct {
	Err  error
	Code int
	Hint string
}

func (e *HintError) Error() string { return e.Err.Error() }
func (e *HintError) Unwrap() error { return e.Err }

// WithHint wraps err so that the user sees hint on a second line and the
// process exits with code.
func WithHint(err error, code int, hint string) error {
	if err == nil {
		return nil
	}
	return &HintError{Err: err, Code: code, Hint: hint}
}

// FlagErr names the flag whose value err is about.
func FlagErr(flag string, err error) error { return fmt.Errorf("%s: %w", flag, err) }

// Classify maps a backend's own errors to an exit code and a hint
// (exitcode.Failure and "" for the rest).
type Classify func(error) (code int, hint string)

// ExitCode is, for both CLIs, the single place where an error becomes a
// message on stderr and a process exit code: the command's own code
// (ExitError) as is and silently, a cancel (SIGINT, SIGTERM) as 130, a
// hinted or usage error by its hint, anything else by classify.
func ExitCode(err error, stderr io.Writer, classify Classify) int {
	if err == nil {
		return exitcode.OK
	}
	var ee ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if errors.Is(err, context.Canceled) {
		return exitcode.Canceled
	}
	var code int
	var hint string
	var he *HintError
	var ue UsageError
	switch {
	case errors.As(err, &he):
		code, hint = he.Code, he.Hint
	case errors.As(err, &ue):
		code, hint = exitcode.Usage, "run `lazaret --help` for usage"
	default:
		code, hint = classify(err)
	}
	// Error messages quote what failed, and that is often the agent's or
	// the cluster's text (a file name in a merge conflict, git's or
	// podman's stderr, a ref name, an object's name or condition): shown
	// escaped, on one line, like every other piece of sandbox text.
	msg := visible.Line(strings.ReplaceAll(err.Error(), "\n", " "))
	fmt.Fprintf(stderr, "lazaret: %s\n", msg)
	if hint != "" {
		fmt.Fprintf(stderr, "hint: %s\n", hint)
	}
	return code
}
