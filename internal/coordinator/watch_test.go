package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// dyingComponent is a Watcher whose Watch fails when die is closed.
type dyingComponent struct {
	name string
	die  chan struct{}
}

func (d *dyingComponent) Name() string                                         { return d.name }
func (d *dyingComponent) Prepare(context.Context, *podman.ContainerSpec) error { return nil }
func (d *dyingComponent) Started(context.Context, string) error                { return nil }
func (d *dyingComponent) Close(context.Context) error                          { return nil }
func (d *dyingComponent) Watch(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-d.die:
		return errors.New("lazaret-netd exited (container exited, exit code 137)")
	}
}

// TestDeadComponentStopsTheSandbox: when a watched component dies the
// coordinator shuts down with a reason naming it, refuses new sessions
// and new commands of attached sessions with that reason, and reports it
// in its status. Positive control: before the death, the same session
// attaches and gets its exec spec.
func TestDeadComponentStopsTheSandbox(t *testing.T) {
	netd := &dyingComponent{name: "netd", die: make(chan struct{})}
	c := &coordinator{wake: make(chan struct{}, 1), torndown: make(chan struct{}), ready: make(chan struct{}), log: slog.New(slog.DiscardHandler),
		o:     Options{Anchor: &domain.Anchor{Profile: "default"}},
		comps: []sandbox.Component{netd}, prepared: 1, spec: &podman.ContainerSpec{Name: "lazaret-default-x"}}
	close(c.ready)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.watchComponents(ctx)

	s := &ctlserver.Session{SessionInfo: ctl.SessionInfo{ID: "s1"}}
	execSpec := func() error {
		_, err := c.handleExecSpec(ctx, &ctlserver.Request{Session: s, Request: ctl.Request{Payload: []byte(`{}`)}})
		return err
	}
	if err := c.attached(s); err != nil {
		t.Fatalf("control: attach before the death: %v", err)
	}
	if err := execSpec(); err != nil {
		t.Fatalf("control: exec spec before the death: %v", err)
	}

	close(netd.die)
	select {
	case <-c.wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the coordinator was not woken by the dead component")
	}
	c.mu.Lock()
	down, reason := c.shuttingDown, c.reason
	c.mu.Unlock()
	if !down || !strings.Contains(reason, "component netd failed") || !strings.Contains(reason, "exit code 137") {
		t.Fatalf("shutting down %v, reason %q", down, reason)
	}
	if err := execSpec(); !errors.Is(err, ctl.ErrShuttingDown) || !strings.Contains(err.Error(), "netd failed") {
		t.Errorf("exec spec after the death: %v", err)
	}
	if err := c.attached(&ctlserver.Session{}); !errors.Is(err, ctl.ErrShuttingDown) || !strings.Contains(err.Error(), "netd failed") {
		t.Errorf("attach after the death: %v", err)
	}
}

// TestExecSpecCarriesTheContainerID: the CLI runs the command with runsc
// exec only when it knows the container's ID (internal/adapter/runscexec).
func TestExecSpecCarriesTheContainerID(t *testing.T) {
	id := strings.Repeat("ab", 32)
	c := &coordinator{wake: make(chan struct{}, 1), torndown: make(chan struct{}), ready: make(chan struct{}), log: slog.New(slog.DiscardHandler),
		o: Options{Anchor: &domain.Anchor{Profile: "default"}}, containerID: id, spec: &podman.ContainerSpec{Name: "lazaret-default-x"}}
	close(c.ready)
	s := &ctlserver.Session{SessionInfo: ctl.SessionInfo{ID: "s1"}}
	got, err := c.handleExecSpec(context.Background(), &ctlserver.Request{Session: s, Request: ctl.Request{Payload: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	spec := got.(*ctl.ExecSpec)
	if spec.ContainerID != id || spec.Container != "lazaret-default-x" || spec.Env["LAZARET_SESSION_ID"] != "s1" {
		t.Errorf("exec spec = %+v", spec)
	}
}
