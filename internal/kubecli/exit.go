package kubecli

import (
	"errors"
	"io"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

// setupError is the cluster not ready for lazaret, with the fix.
type setupError struct {
	err  error
	hint string
}

func (e setupError) Error() string { return e.err.Error() }
func (e setupError) Unwrap() error { return e.err }

// refusal is a security check that refused to go on, with the way out.
type refusal struct {
	msg  string
	hint string
}

func (e refusal) Error() string { return e.msg }

// exitCode is the single place where an error becomes a message on stderr
// and an exit code: clicore.ExitCode, the local CLI's too, with
// lazaret-kube's classify. Messages quote the cluster's answers (object
// names, condition messages, API errors): shown escaped, on one line.
func exitCode(err error, stderr io.Writer) int { return clicore.ExitCode(err, stderr, classify) }

// classify maps lazaret-kube's own errors to an exit code and a hint.
func classify(err error) (int, string) {
	var se setupError
	var rf refusal
	var start *kube.StartError
	var xf execFailed
	switch {
	case errors.As(err, &rf):
		return exitcode.Security, rf.hint
	case errors.As(err, &start):
		return start.Code, ""
	case errors.As(err, &xf):
		return exitcode.ExecFailed, "if the sandbox's pod is gone or broken, `lazaret --backend kubernetes stop` and run the command again"
	case config.Errors(err) != nil:
		if config.IsSecurity(err) {
			return exitcode.Security, clicore.ConfigHint(config.Errors(err), false)
		}
		return exitcode.Config, clicore.ConfigHint(config.Errors(err), false)
	case errors.Is(err, kube.ErrCRDMissing):
		return exitcode.Setup, "install agent-sandbox v1.0.1 (its CRDs and controller, with the extensions) in the cluster: see " + locate.Doc("KUBERNETES.md")
	case errors.Is(err, kube.ErrForbidden):
		return exitcode.Setup, "your kubeconfig's user lacks a permission named above: see " + locate.Doc("KUBERNETES.md") + " for the Role lazaret needs"
	case errors.Is(err, kube.ErrUnreachable):
		return exitcode.Setup, "check the cluster is up and --kubeconfig/--context point at it; `lazaret --backend kubernetes doctor`"
	case errors.As(err, &se):
		return exitcode.Setup, se.hint
	}
	return exitcode.Failure, ""
}
