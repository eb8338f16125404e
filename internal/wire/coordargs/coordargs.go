// Package coordargs is the command line of the coordinator process: the
// CLI writes it when it spawns `lazaret __coordinator` (cli/connect), and
// the coordinator's own entry (coordinator/entry) reads it before any of
// the CLI's code exists in that process.
package coordargs

import (
	"errors"
	"flag"
	"io"
)

// Verb is the hidden first argument that makes the lazaret binary a
// coordinator (cmd/lazaret dispatches on it).
const Verb = "__coordinator"

// RecoverFlag tells a new coordinator that its predecessor died without
// cleaning up: it removes the domain's leftover containers first.
const RecoverFlag = "--recover"

// Args are the coordinator's flags.
type Args struct {
	// Config is the configuration file, absolute; "" is the default one.
	Config    string
	Verbose   bool
	AllowRoot bool
	Profile   string
	// Workspace is the canonical workspace directory the CLI resolved.
	Workspace string
	// Attempt names the parallel attempt (`lazaret fork`) whose sandbox
	// this is; "" for the workspace's own.
	Attempt string
	// WithChanges is the starting CLI's --with-changes.
	WithChanges bool
	Recover     bool
}

// Argv is a's command line after the program name, Verb first.
func (a Args) Argv() []string {
	argv := []string{Verb}
	if a.Config != "" {
		argv = append(argv, "--config", a.Config)
	}
	if a.Verbose {
		argv = append(argv, "--verbose")
	}
	if a.AllowRoot {
		argv = append(argv, "--allow-root")
	}
	argv = append(argv, "--profile", a.Profile, "--workspace", a.Workspace)
	if a.Attempt != "" {
		argv = append(argv, "--attempt", a.Attempt)
	}
	if a.WithChanges {
		argv = append(argv, "--with-changes")
	}
	if a.Recover {
		argv = append(argv, RecoverFlag)
	}
	return argv
}

// Parse reads argv (after Verb).
func Parse(argv []string) (Args, error) {
	var a Args
	fs := flag.NewFlagSet(Verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.Config, "config", "", "configuration file")
	fs.BoolVar(&a.Verbose, "verbose", false, "debug logs")
	fs.BoolVar(&a.AllowRoot, "allow-root", false, "allow running as root")
	fs.StringVar(&a.Profile, "profile", "", "profile")
	fs.StringVar(&a.Workspace, "workspace", "", "canonical workspace directory")
	fs.StringVar(&a.Attempt, "attempt", "", "the attempt's name")
	fs.BoolVar(&a.WithChanges, "with-changes", false, "carry the host's uncommitted changes into a new agent clone")
	fs.BoolVar(&a.Recover, "recover", false, "remove the domain's leftover containers first")
	if err := fs.Parse(argv); err != nil {
		return Args{}, err
	}
	switch {
	case fs.NArg() > 0:
		return Args{}, errors.New("unexpected arguments")
	case a.Profile == "" || a.Workspace == "":
		return Args{}, errors.New("--profile and --workspace are required")
	}
	return a, nil
}
