// Package entry is the coordinator process's main. cmd/lazaret dispatches
// `lazaret __coordinator …` here before the CLI's command tree is built,
// as runsc dispatches its sandbox process: no CLI package runs in the
// coordinator (its flags, signals, log, configuration and secrets are set
// up here).
package entry

import (
	"context"
	"errors"
	"fmt"
	"github.com/lazaret-dev/lazaret/internal/engine/attempt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/wire/coordargs"
)

// Main runs the coordinator of argv (the arguments after coordargs.Verb)
// and returns its exit status. stderr is the domain's coordinator log
// (cli/connect spawns it so): a failure before the control socket opens
// is its last line, "lazaret: …", which the waiting CLI shows.
func Main(argv []string, stderr io.Writer) int {
	if err := run(argv, stderr); err != nil {
		fmt.Fprintln(stderr, "lazaret:", err)
		return 1
	}
	return 0
}

func run(argv []string, stderr io.Writer) error {
	// cmd/lazaret did this at start already; the coordinator runs the
	// agent's approved commands, so make sure whoever entered here did.
	if err := fdsafe.MarkInherited(); err != nil {
		return err
	}
	a, err := coordargs.Parse(argv)
	if err != nil {
		return fmt.Errorf("%s: %w", coordargs.Verb, err)
	}
	// The coordinator has no terminal (setsid); a hang-up of the session
	// that started it must not end it. SIGINT/SIGTERM stop it cleanly.
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	level := slog.LevelInfo
	if a.Verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if os.Geteuid() == 0 && !a.AllowRoot {
		return errors.New("refusing to run as root: lazaret runs agents in rootless podman as an unprivileged user")
	}
	opts, err := resolve(a, stderr)
	if err != nil {
		return err
	}
	opts.Log = log
	opts.Podman = &podman.Client{Log: log}
	// The secrets' values, before anything starts (and before any podman
	// could inherit a variable holding one).
	if opts.Secrets, err = sidecar.FetchSecrets(ctx, opts.Profile); err != nil {
		return err
	}
	return coordinator.Run(ctx, opts)
}

// resolve loads the configuration and builds the domain the CLI named: the
// same checks as the CLI's (the workspace the CLI resolved is checked
// again, the profile's volumes resolved for it).
func resolve(a coordargs.Args, stderr io.Writer) (coordinator.Options, error) {
	cfg, err := config.Load(a.Config)
	if err != nil {
		return coordinator.Options{}, err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "lazaret: warning: %s\n", w)
	}
	p, err := cfg.Profile(a.Profile)
	if err != nil {
		return coordinator.Options{}, err
	}
	if a.WithChanges {
		p.WithChanges = true
	}
	ws, err := gitrepo.ChooseWorkspace(a.Workspace, true, p.GitMode, func(d string) bool { return cfg.CheckWorkspace(d) == nil })
	if err != nil {
		return coordinator.Options{}, err
	}
	if err := cfg.CheckWorkspace(ws); err != nil {
		return coordinator.Options{}, err
	}
	runtimeDir, err := domain.RuntimeDir()
	if err != nil {
		return coordinator.Options{}, fmt.Errorf("runtime directory: %w", err)
	}
	anchor, err := domain.New(p.Name, ws, cfg.DataRoot, runtimeDir, cfg.Escalation.SocketDir)
	if err != nil {
		return coordinator.Options{}, err
	}
	if a.Attempt != "" {
		if anchor, err = attempt.Open(anchor, a.Attempt); err != nil {
			return coordinator.Options{}, err
		}
	}
	vols, err := p.ResolveVolumes(config.AnchorTokens(anchor))
	if err != nil {
		return coordinator.Options{}, err
	}
	return coordinator.Options{Config: cfg, Profile: p, Anchor: anchor, Volumes: vols, Recover: a.Recover}, nil
}
