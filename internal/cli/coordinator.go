package cli

import (
	"context"
	"errors"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
)

// coordinatorCmdName is the hidden command that runs the Session
// Coordinator; the CLI spawns it detached (internal/cli/connect).
const coordinatorCmdName = "__coordinator"

// CoordinatorRequest is a resolved `lazaret __coordinator`: the domain whose
// Session Coordinator runs in this process, and its log (the process's
// stderr, the domain's coordinator log).
type CoordinatorRequest struct {
	Config  *config.Config
	Profile *config.Profile
	Anchor  *domain.Anchor
	Volumes []config.ResolvedVolume
	// Recover: the previous coordinator left a dead socket.
	Recover bool
	Log     *slog.Logger
}

// CoordinatorFunc runs the Session Coordinator of r until it exits.
type CoordinatorFunc func(ctx context.Context, r CoordinatorRequest) error

type coordinatorOptions struct {
	profile   string
	workspace string
	recover   bool
	// withChanges: the starting CLI's --with-changes (Profile.WithChanges).
	withChanges bool
}

func newCoordinatorCmd(g *globalOptions) *cobra.Command {
	o := &coordinatorOptions{}
	cmd := &cobra.Command{
		Use:    coordinatorCmdName,
		Short:  "Run the Session Coordinator of one domain (started by lazaret itself)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(cmd *cobra.Command, _ []string) error { return runCoordinator(cmd, g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.profile, "profile", config.DefaultProfileName, "profile")
	f.StringVar(&o.workspace, "workspace", "", "canonical workspace directory")
	f.BoolVar(&o.recover, "recover", false, "remove the domain's leftover containers first")
	f.BoolVar(&o.withChanges, "with-changes", false, "carry the host's uncommitted changes into a new agent clone")
	_ = cmd.MarkFlagRequired("workspace")
	return cmd
}

func runCoordinator(cmd *cobra.Command, g *globalOptions, o *coordinatorOptions) error {
	// cmd/lazaret did this at start already; the coordinator runs the
	// agent's approved commands, so make sure whoever entered here did.
	if err := fdsafe.MarkInherited(); err != nil {
		return err
	}
	// The coordinator has no terminal (setsid); a hang-up of the session
	// that started it must not end it.
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	level := slog.LevelInfo
	if g.verbose {
		level = slog.LevelDebug
	}
	// stderr is the coordinator log (internal/cli/connect spawns it so).
	log := slog.New(slog.NewTextHandler(g.io.ErrOut, &slog.HandlerOptions{Level: level}))
	g.log = log
	if err := g.refuseRoot(); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	p, a, err := g.resolveDomain(cfg, o.profile, o.workspace)
	if err != nil {
		return err
	}
	if o.withChanges {
		p.WithChanges = true
	}
	vols, err := p.ResolveVolumes(config.AnchorTokens(a))
	if err != nil {
		return err
	}
	if g.runCoordinator == nil {
		return errors.New("this lazaret binary cannot run a coordinator")
	}
	return g.runCoordinator(cmd.Context(), CoordinatorRequest{
		Config: cfg, Profile: p, Anchor: a, Volumes: vols, Recover: o.recover, Log: log,
	})
}
