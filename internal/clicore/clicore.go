// Package clicore is the core both CLIs share: `lazaret` (internal/cli)
// and lazaret-kube (internal/kubecli, the Kubernetes backend that
// `lazaret --backend kubernetes VERB` execs). It holds what must not
// differ between the backends: the streams, the global flags, the root
// command's set-up and its usage errors, the one body that turns an error
// into a message, a hint and an exit code, the target resolution
// (configuration, profile, workspace, Domain Anchor) and the interactive
// shell; termgate is the terminal gate. Each backend supplies its verbs
// and its classify (its own errors → exit code and hint). Both processes
// link it, so it links neither client-go nor the coordinator
// (cmd/*/deps_test.go).
package clicore

import (
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
)

// IO is the set of streams a command uses, injectable for tests.
type IO struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Files are the streams that are files (a terminal's modes and size are
// read from them); nil for streams tests replaced.
func (s IO) Files() (in, out, errOut *os.File) {
	in, _ = s.In.(*os.File)
	out, _ = s.Out.(*os.File)
	errOut, _ = s.ErrOut.(*os.File)
	return in, out, errOut
}

// GlobalFlags are where a CLI keeps the global flags both CLIs have.
type GlobalFlags struct {
	Config    *string
	Workspace *string
	Verbose   *bool
	// Attempt is --attempt NAME: the verb works on that attempt (`lazaret
	// fork`) of the workspace instead of its own sandbox.
	Attempt *string
}

// Register declares the flags on pf, with one help text for both CLIs.
func (f GlobalFlags) Register(pf *pflag.FlagSet) {
	pf.StringVar(f.Config, "config", "", "configuration file (default $XDG_CONFIG_HOME/lazaret/config.toml)")
	pf.StringVar(f.Workspace, "workspace", "", "the Agent Workspace, taken as is (default: the current directory, or the top level of the git repository it is in)")
	pf.BoolVarP(f.Verbose, "verbose", "v", false, "debug logs on stderr")
	if f.Attempt != nil {
		pf.StringVar(f.Attempt, "attempt", "", "work on attempt NAME of this workspace (lazaret fork; lazaret attempts lists them)")
	}
}

// NewLog is a CLI's log: text on stderr, debug with --verbose, else
// warnings only.
func NewLog(stderr io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// InteractiveShell is what `shell` runs on both backends: bash when the
// image has it, else sh, as an interactive but not a login shell, like
// `podman exec -it ctr bash`: a login shell's /etc/profile resets PATH on
// Debian-based images, which would hide lazaret-escalate
// (/run/lazaret/bin) and the image's own ENV PATH from the agent.
var InteractiveShell = []string{"/bin/sh", "-c", `if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi`}
