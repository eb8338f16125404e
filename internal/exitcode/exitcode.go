// Package exitcode holds the exit codes of lazaret's own failures, shared
// by the local CLI (internal/cli) and the Kubernetes backend
// (internal/kubecli) so that both backends mean the same by each. A
// command run in a sandbox returns its own exit code instead.
package exitcode

const (
	OK       = 0
	Failure  = 1
	Usage    = 2
	Setup    = 3 // environment not ready: podman, runsc, image, user, cluster
	Config   = 4 // configuration file invalid
	Security = 5 // a security check refused the operation
	// ExecFailed is the exec itself failing (podman exec's 125, or the
	// API server's exec), not the command.
	ExecFailed = 125
	// CannotExec and NotFound are a command the sandbox could not run, as
	// a shell says.
	CannotExec = 126
	NotFound   = 127
	Canceled   = 130
)
