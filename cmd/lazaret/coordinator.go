package main

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/cli"
	"github.com/lazaret-dev/lazaret/internal/coordinator"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/podman"
)

// runCoordinator runs the Session Coordinator the CLI's hidden
// __coordinator verb resolved: the one place the binary joins the CLI's
// packages to the coordinator's.
func runCoordinator(ctx context.Context, r cli.CoordinatorRequest) error {
	// The secrets' values, before anything starts (and before any podman
	// could inherit a variable holding one).
	secrets, err := sidecar.FetchSecrets(ctx, r.Profile)
	if err != nil {
		return err
	}
	return coordinator.Run(ctx, coordinator.Options{
		Config: r.Config, Profile: r.Profile, Anchor: r.Anchor, Volumes: r.Volumes, Recover: r.Recover,
		Podman: &podman.Client{Log: r.Log}, Log: r.Log, Secrets: secrets,
	})
}
