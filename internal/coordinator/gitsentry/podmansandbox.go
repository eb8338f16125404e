package gitsentry

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/refsync"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// podmanSandbox is the ref sync's way into a local sandbox: podman exec
// in the agent container.
type podmanSandbox struct {
	podman    *podman.Client
	container string
	isolated  bool // under the isolating holder (Component.Isolated)
}

func (p podmanSandbox) Name() string { return p.container }

func (p podmanSandbox) Start(ctx context.Context, argv []string) (*refsync.Proc, error) {
	o := podman.ExecOptions{Container: p.container, Interactive: true, Command: argv}
	if p.isolated {
		o.Command, o.Privileged = escprompt.IsolatedCommand(argv), true
	}
	cmd, err := p.podman.ExecCmd(ctx, o)
	if err != nil {
		return nil, err
	}
	return refsync.StartCmd(cmd)
}
