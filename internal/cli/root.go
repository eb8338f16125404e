// Package cli is lazaret's command tree: one file per verb, an options
// struct and a run function each. What it shares with lazaret-kube (root,
// global flags, streams, usage errors, the error → exit code body, target
// resolution, terminal gate) is internal/clicore's; classify.go maps the
// local backend's errors for it.
package cli

import (
	"log/slog"
	"os"

	"github.com/lazaret-dev/lazaret/internal/clicore"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/spf13/cobra"
)

// IO is the set of streams a command uses, injectable for tests
// (clicore's, shared with lazaret-kube).
type IO = clicore.IO

// globalOptions are the flags every command shares.
type globalOptions struct {
	io         IO
	configPath string
	workspace  string // --workspace: the directory taken as is
	attempt    string // --attempt: an attempt of the workspace (lazaret fork)
	// attemptBackend is the backend whose attempts --attempt may name:
	// the local one's, or clicore.AnyBackend for the review verbs.
	attemptBackend string
	verbose        bool
	allowRoot      bool
	log            *slog.Logger
}

// podmanClient is the podman adapter of every verb, logging to the CLI's
// log.
func (g *globalOptions) podmanClient() *podman.Client { return &podman.Client{Log: g.log} }

// hostGit is the host git adapter of every verb.
func (g *globalOptions) hostGit() *hostgit.Git { return &hostgit.Git{Log: g.log} }

// Main runs lazaret with args (args[0] is the program name) and returns
// the process exit code. The hidden __coordinator verb is not among its
// commands: cmd/lazaret dispatches it to the coordinator's own entry.
func Main(args []string) int {
	return run(args, IO{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
}

// Run is Main on streams (the tests of both CLIs).
func Run(args []string, streams IO) int { return run(args, streams) }

func run(args []string, streams IO) int {
	backend, rest, err := splitBackend(args[1:], os.Getenv)
	if err != nil {
		return exitCode(err, streams.ErrOut)
	}
	if backend == backendKubernetes {
		return exitCode(execKube(rest), streams.ErrOut) // returns only on failure
	}
	g := &globalOptions{io: streams}
	return clicore.Execute(newRootCmd(g), rest, streams, classify)
}

func newRootCmd(g *globalOptions) *cobra.Command {
	root := clicore.NewRoot(clicore.RootSpec{
		Use:   "lazaret",
		Short: "Run untrusted coding agents in rootless gVisor sandboxes",
		Long: `Lazaret runs AI coding agents inside rootless Podman containers under gVisor
(runsc): no host network or namespaces, an egress allowlist, persistent tools,
real git on an agent branch, and human-approved host escalation.`,
		Flags:  clicore.GlobalFlags{Config: &g.configPath, Workspace: &g.workspace, Verbose: &g.verbose, Attempt: &g.attempt},
		SetLog: func(l *slog.Logger) { g.log = l },
	})
	root.CompletionOptions = cobra.CompletionOptions{HiddenDefaultCmd: false}
	pf := root.PersistentFlags()
	pf.BoolVar(&g.allowRoot, "allow-root", false, "allow running as root (not rootless; not recommended)")
	// Taken out of the arguments before cobra (splitBackend); declared so
	// that help shows it.
	pf.String("backend", backendPodman, "where sandboxes run: podman (this machine) or kubernetes (lazaret-kube; also $LAZARET_BACKEND)")
	setVersionFlag(root)

	root.AddCommand(
		newVersionCmd(g),
		newShellCmd(g), newExecCmd(g), newAttachCmd(g), newStatusCmd(g), newStopCmd(g), newPsCmd(g),
		newInitCmd(g),
		newConfigCmd(g),
		newDomainCmd(g),
		newImageCmd(g),
		newDoctorCmd(g),
		newDiffCmd(g), newLogCmd(g), newMergeCmd(g), newResetBranchCmd(g),
		newStateCmd(g),
		newAuditCmd(g),
		newNetCmd(g),
		clicore.NewPolicyCmd(&g.io),
		newProposalsCmd(g),
		clicore.NewForkCmd(g.attemptsSpec()), clicore.NewAttemptsCmd(g.attemptsSpec()),
		clicore.NewApprovalsCmd(&clicore.Approvals{IO: g.io, Log: func() *slog.Logger { return g.log }, Invocation: "lazaret"}), newEventsCmd(g),
	)
	root.InitDefaultCompletionCmd() // now, so that the walks below see it
	clicore.GroupCommands(root)
	g.completeProfilesEverywhere(root)
	return root
}
