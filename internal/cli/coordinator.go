package cli

import (
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/coord"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/podman"
	"github.com/lazaret-dev/lazaret/internal/sidecar"
)

// coordinatorCmdName is the hidden command that runs the Session
// Coordinator; the CLI spawns it detached (internal/coord).
const coordinatorCmdName = "__coordinator"

type coordinatorOptions struct {
	profile   string
	workspace string
	recover   bool
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
	// stderr is the coordinator log (internal/coord spawns it so).
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
	vols, err := p.ResolveVolumes(config.AnchorTokens(a))
	if err != nil {
		return err
	}
	// The secrets' values, before anything starts (and before any podman
	// could inherit a variable holding one).
	secrets, err := sidecar.FetchSecrets(cmd.Context(), p)
	if err != nil {
		return err
	}
	return coord.Run(cmd.Context(), coord.Options{
		Config: cfg, Profile: p, Anchor: a, Volumes: vols, Recover: o.recover,
		Podman: &podman.Client{Log: log}, Log: log, Secrets: secrets,
	})
}
