// Package cli is lazaret's command tree: one file per verb, an options
// struct and a run function each, and the single place (exit.go) where
// errors become messages and exit codes.
package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/hostgit"
	"github.com/lazaret-dev/lazaret/internal/podman"
	"github.com/spf13/cobra"
)

// IO is the set of streams a command uses, injectable for tests.
type IO struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// globalOptions are the flags every command shares.
type globalOptions struct {
	io         IO
	configPath string
	workspace  string // --workspace: the directory taken as is
	verbose    bool
	allowRoot  bool
	log        *slog.Logger
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

func run(args []string, streams IO) int {
	backend, rest, err := splitBackend(args[1:], os.Getenv)
	if err != nil {
		return exitCode(err, streams.ErrOut)
	}
	if backend == backendKubernetes {
		return exitCode(execKube(rest), streams.ErrOut) // returns only on failure
	}
	args = append(args[:1:1], rest...)
	// A context cancelled by SIGINT/SIGTERM is a clean exit, not an error.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := &globalOptions{io: streams}
	root := newRootCmd(g)
	root.SetArgs(args[1:])
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	cmd, err := root.ExecuteContextC(ctx)
	return exitCode(usageHint(cmd, err), streams.ErrOut)
}

func newRootCmd(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "lazaret",
		Short: "Run untrusted coding agents in rootless gVisor sandboxes",
		Long: `Lazaret runs AI coding agents inside rootless Podman containers under gVisor
(runsc): no host network or namespaces, an egress allowlist, persistent tools,
real git on an agent branch, and human-approved host escalation.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if g.verbose {
				level = slog.LevelDebug
			}
			g.log = slog.New(slog.NewTextHandler(g.io.ErrOut, &slog.HandlerOptions{Level: level}))
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.configPath, "config", "", "configuration file (default $XDG_CONFIG_HOME/lazaret/config.toml)")
	pf.StringVar(&g.workspace, "workspace", "", "the Agent Workspace, taken as is (default: the current directory, or the top level of the git repository it is in)")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "debug logs on stderr")
	pf.BoolVar(&g.allowRoot, "allow-root", false, "allow running as root (not rootless; not recommended)")
	// Taken out of the arguments before cobra (splitBackend); declared so
	// that help shows it.
	pf.String("backend", backendPodman, "where sandboxes run: podman (this machine) or kubernetes (lazaret-kube; also $LAZARET_BACKEND)")
	root.SetFlagErrorFunc(flagError)
	setVersionFlag(root)

	root.AddCommand(
		newVersionCmd(g),
		newShellCmd(g), newExecCmd(g), newStatusCmd(g), newStopCmd(g), newPsCmd(g),
		newInitCmd(g),
		newConfigCmd(g),
		newDomainCmd(g),
		newImageCmd(g),
		newDoctorCmd(g),
		newDiffCmd(g), newLogCmd(g), newMergeCmd(g), newResetBranchCmd(g),
		newStateCmd(g),
		newAuditCmd(g),
		newNetCmd(g),
	)
	root.InitDefaultCompletionCmd() // now, so that the walks below see it
	groupCommands(root)
	g.completeProfilesEverywhere(root)
	return root
}
