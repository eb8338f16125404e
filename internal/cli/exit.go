package cli

import (
	"io"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
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

// The error types of clicore, the core both CLIs share, under the names
// this package's verbs use: a usage error (exit 2, a hint naming the
// command's help), the sandbox command's own exit code, an error with its
// exit code and hint.

// usageError is a bad flag or argument (clicore.UsageError).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return clicore.UsageError{Err: e.err} }

// exitError carries an exit code that must be returned as is, such as the
// exit code of the command run in the sandbox (clicore.ExitError).
type exitError struct{ code int }

func (e exitError) Error() string { return clicore.ExitError{Code: e.code}.Error() }
func (e exitError) Unwrap() error { return clicore.ExitError{Code: e.code} }

// hintError attaches an exit code and a hint to an error.
type hintError = clicore.HintError

// withHint wraps err so that the user sees hint on a second line and the
// process exits with code.
func withHint(err error, code int, hint string) error { return clicore.WithHint(err, code, hint) }

// exitCode is the single place where an error becomes a message on stderr
// and a process exit code: clicore.ExitCode, with lazaret's classify.
func exitCode(err error, stderr io.Writer) int { return clicore.ExitCode(err, stderr, classify) }
