// Package sandbox assembles the Agent Sandbox: the container spec with its
// hardening flags and mounts, the runsc runtime shim, and the components
// (network sidecar, State Anchor, Git Sentry, Trust Anchor) that contribute
// mounts and run beside the container.
package sandbox

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
)

// Component is one part of a sandbox's life that the Session Coordinator
// runs in order: Prepare for every component, then the container starts,
// then Started for every component; Close in reverse order at teardown.
type Component interface {
	// Name is a short name for logs and errors ("netd", "stateanchor", ...).
	Name() string
	// Prepare runs before the container is created. It may add mounts,
	// environment, annotations or a network to spec. An error aborts the
	// start; the coordinator then calls Close on every component already
	// prepared, including this one.
	Prepare(ctx context.Context, spec *podman.ContainerSpec) error
	// Started runs once the container is running.
	Started(ctx context.Context, container string) error
	// Close releases whatever Prepare and Started made. It must be safe to
	// call more than once and after a failed Prepare.
	Close(ctx context.Context) error
}

// Deferred is a Component whose Prepare returns before all its work is
// done: it has added its mounts to the spec, but their sources are still
// being made. The coordinator starts the container meanwhile and holds
// the runtime's create at its start gate (internal/engine/startgate) until
// every Deferred component's Ready has returned; an error from Ready
// fails the start as Prepare's would. Ready may be called more than once
// and returns the same result; Close waits for the work to end.
type Deferred interface {
	Ready(ctx context.Context) error
}
