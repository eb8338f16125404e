package gitsentry

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/podman"
	"github.com/lazaret-dev/lazaret/internal/refsync"
)

// podmanSandbox is the ref sync's way into a local sandbox: podman exec
// in the agent container.
type podmanSandbox struct {
	podman    *podman.Client
	container string
}

func (p podmanSandbox) Name() string { return p.container }

func (p podmanSandbox) Start(ctx context.Context, argv []string) (*refsync.Proc, error) {
	cmd, err := p.podman.ExecCmd(ctx, podman.ExecOptions{Container: p.container, Interactive: true, Command: argv})
	if err != nil {
		return nil, err
	}
	return refsync.StartCmd(cmd)
}
