package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// Exit codes of lazaret's own failures. A command run in the sandbox
// returns its own exit code instead (see exitError).
// The values are internal/exitcode's, shared with the Kubernetes backend.
const (
	exitOK       = exitcode.OK
	exitFailure  = exitcode.Failure
	exitUsage    = exitcode.Usage
	exitSetup    = exitcode.Setup    // environment not ready: podman, runsc, image, user
	exitConfig   = exitcode.Config   // configuration file invalid
	exitSecurity = exitcode.Security // a security check refused the operation
	exitCanceled = exitcode.Canceled
)

// usageError is a bad flag or argument.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitError carries an exit code that must be returned as is, such as the
// exit code of the command run in the sandbox. It prints nothing.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// hintError attaches an exit code and a hint to an error.
type hintError struct {
	err  error
	code int
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

// withHint wraps err so that the user sees hint on a second line and the
// process exits with code.
func withHint(err error, code int, hint string) error {
	if err == nil {
		return nil
	}
	return &hintError{err: err, code: code, hint: hint}
}

// exitCode is the single place where an error becomes a message on stderr
// and a process exit code.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, context.Canceled) {
		return exitCanceled
	}
	code, hint := exitFailure, ""
	var he *hintError
	var ue usageError
	switch {
	case errors.As(err, &he):
		code, hint = he.code, he.hint
	case errors.As(err, &ue):
		code, hint = exitUsage, "run `lazaret --help` for usage"
	default:
		code, hint = classify(err)
	}
	// Error messages quote what failed, and that is often the agent's
	// text (a file name in a merge conflict, git's or podman's stderr, a
	// ref name): shown escaped, on one line, like every other piece of
	// sandbox text.
	msg := visible.Line(strings.ReplaceAll(err.Error(), "\n", " "))
	fmt.Fprintf(stderr, "lazaret: %s\n", msg)
	if hint != "" {
		fmt.Fprintf(stderr, "hint: %s\n", hint)
	}
	return code
}
