// Package kubecli is lazaret-kube's command tree: the Kubernetes backend
// of `lazaret --backend kubernetes VERB`, one file per verb, an options
// struct and a run function each, like internal/cli (whose packages it
// does not import: it runs in its own binary so that client-go never
// links into lazaret). What the two CLIs share (root, global flags,
// streams, usage errors, the error → exit code body, target resolution,
// terminal gate) is internal/clicore's; exit.go classifies the cluster's
// own errors for it.
package kubecli

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// IO is the set of streams a command uses, injectable for tests
// (clicore's, shared with the local CLI).
type IO = clicore.IO

// globals are the flags every command shares, and what tests replace.
type globals struct {
	io         IO
	configPath string
	workspace  string
	// attempt is --attempt: the verb works on that attempt of the
	// workspace (`lazaret fork`).
	attempt    string
	verbose    bool
	kubeconfig string
	context    string
	namespace  string
	log        *slog.Logger
	// connect builds the cluster client (tests: fake clientsets).
	connect func(config.Cluster) (*kube.Client, error)
	// now is the clock (tests: fixed).
	now func() time.Time
	// copyTimeout bounds the copy pods of fork and attempts keep.
	copyTimeout time.Duration
	// noClone is fork --no-clone: a copy pod even where a clone could be.
	noClone bool
	// poll is the interval of the waits on the cluster.
	poll time.Duration
	cfg  *config.Config
	// uid is the only user a session's control socket admits
	// (SO_PEERCRED): this process's (tests: another, the refusal).
	uid int
}

// Main runs lazaret-kube with args (args[0] is the program name) and
// returns the process exit code.
func Main(args []string) int {
	g := newGlobals(IO{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	return run(g, args)
}

func newGlobals(streams IO) *globals {
	return &globals{io: streams, now: time.Now, poll: time.Second, copyTimeout: defaultCopyTimeout, uid: os.Getuid(), connect: func(c config.Cluster) (*kube.Client, error) {
		return kube.Connect(kube.Options{Kubeconfig: c.Kubeconfig, Context: c.Context, Namespace: c.Namespace})
	}}
}

// Run is Main on streams (the tests of both CLIs).
func Run(args []string, streams IO) int { return run(newGlobals(streams), args) }

func run(g *globals, args []string) int {
	return clicore.Execute(newRootCmd(g), args[1:], g.io, classify)
}

// invocation is how the user runs lazaret-kube, for messages and hints.
const invocation = "lazaret --backend kubernetes"

func newRootCmd(g *globals) *cobra.Command {
	root := clicore.NewRoot(clicore.RootSpec{
		Use:   "lazaret-kube",
		Short: "Lazaret's Kubernetes backend (run as `lazaret --backend kubernetes`)",
		Long: `lazaret-kube runs lazaret's profiles on a Kubernetes cluster with agent-sandbox
(SandboxTemplate, SandboxWarmPool, SandboxClaim; gVisor as the RuntimeClass).
It is what ` + "`lazaret --backend kubernetes VERB`" + ` (or LAZARET_BACKEND=kubernetes) runs.`,
		Invocation: invocation,
		Flags:      clicore.GlobalFlags{Config: &g.configPath, Workspace: &g.workspace, Verbose: &g.verbose, Attempt: &g.attempt},
		SetLog:     func(l *slog.Logger) { g.log = l },
	})
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file (default [cluster].kubeconfig, $KUBECONFIG, ~/.kube/config)")
	pf.StringVar(&g.context, "context", "", "kubeconfig context (default [cluster].context, else the current one)")
	pf.StringVarP(&g.namespace, "namespace", "n", "", "namespace (default [cluster].namespace, else the context's)")
	root.AddCommand(newExecCmd(g), newShellCmd(g), newStatusCmd(g), newPsCmd(g), newStopCmd(g), newDoctorCmd(g), newSyncCmd(g), newStateCmd(g), newProposalsCmd(g), newAttachCmd(g), newResumeCmd(g), newApprovalsCmd(g), newEventsCmd(g), clicore.NewPolicyCmd(&g.io), newNetCmd(g),
		clicore.NewForkCmd(g.attemptsSpec()), clicore.NewAttemptsCmd(g.attemptsSpec()),
		newReviewCmd(g, "diff", "Show what the agent changed on its branch"),
		newReviewCmd(g, "log", "List the agent's commits"),
		newReviewCmd(g, "merge", "Merge the agent's branch into your current branch"),
		newReviewCmd(g, "reset-branch", "Set the agent's branch aside and start it again"),
		newLocalCmd(g, "audit", "Show the audit trail of this directory's sandboxes, local and on the cluster"))
	clicore.GroupCommands(root)
	return root
}

// loadConfig reads the configuration once; the flags override [cluster].
func (g *globals) loadConfig() (*config.Config, error) {
	if g.cfg != nil {
		return g.cfg, nil
	}
	cfg, err := clicore.LoadConfig(g.configPath, g.io.ErrOut)
	if err != nil {
		return nil, err
	}
	if g.kubeconfig != "" {
		cfg.Cluster.Kubeconfig = g.kubeconfig
	}
	if g.context != "" {
		cfg.Cluster.Context = g.context
	}
	if g.namespace != "" {
		if err := config.ValidNamespace(g.namespace); err != nil {
			return nil, clicore.UsageError{Err: clicore.FlagErr("--namespace", err)}
		}
		cfg.Cluster.Namespace = g.namespace
	}
	g.cfg = cfg
	return cfg, nil
}

// client loads the configuration and connects to its cluster.
// clientFor is client, and the target of profile in this workspace.
func (g *globals) clientFor(profile string) (*config.Config, *kube.Client, *target, error) {
	// The target first, as the local CLI does: a mistyped profile or a
	// refused workspace is told as such, before the cluster is reached.
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := g.resolve(cfg, profile)
	if err != nil {
		return nil, nil, nil, err
	}
	_, c, err := g.client()
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, c, t, nil
}

func (g *globals) client() (*config.Config, *kube.Client, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := g.connect(cfg.Cluster)
	if err != nil {
		switch {
		case g.kubeconfig != "":
			err = clicore.FlagErr("--kubeconfig", err)
		case cfg.Cluster.Kubeconfig != "":
			err = fmt.Errorf("%s: cluster.kubeconfig: %w", cfg.File, err)
		}
		return nil, nil, setupError{err, "check --kubeconfig/--context (or [cluster] kubeconfig and context in the configuration); `lazaret --backend kubernetes doctor` checks the cluster"}
	}
	return cfg, c, nil
}
