package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/engine/startgate"
)

type fakeComp struct {
	name    string
	prepare func(ctx context.Context, s *podman.ContainerSpec) error
}

func (f *fakeComp) Name() string { return f.name }
func (f *fakeComp) Prepare(ctx context.Context, s *podman.ContainerSpec) error {
	return f.prepare(ctx, s)
}
func (f *fakeComp) Started(context.Context, string) error { return nil }
func (f *fakeComp) Close(context.Context) error           { return nil }

func baseSpec() *podman.ContainerSpec {
	return &podman.ContainerSpec{
		Name: "c", Image: "i", Env: map[string]string{"PATH": "/bin", "KEEP": "1"},
		Mounts: []podman.Mount{{Type: "bind", Source: "/v", Target: "/v"}},
		DNS:    []string{"10.0.0.1"}, CapAdd: []string{"CHOWN"},
	}
}

func TestPrepareAllMergesInOrder(t *testing.T) {
	comps := []sandbox.Component{
		&fakeComp{"net", func(_ context.Context, s *podman.ContainerSpec) error {
			time.Sleep(30 * time.Millisecond) // finishes last, merged first
			s.Network = "container:side"
			s.DNS = nil
			return nil
		}},
		&fakeComp{"state", func(_ context.Context, s *podman.ContainerSpec) error {
			s.Mounts = append(s.Mounts, podman.Mount{Type: "bind", Source: "/m", Target: "/usr"})
			return nil
		}},
		&fakeComp{"git", func(_ context.Context, s *podman.ContainerSpec) error {
			s.Mounts = append(s.Mounts, podman.Mount{Type: "bind", Source: "/clone", Target: "/workspace"})
			return nil
		}},
		&fakeComp{"esc", func(_ context.Context, s *podman.ContainerSpec) error {
			s.Env["PATH"] = s.Env["PATH"] + ":/run/lazaret/bin"
			s.Env["NEW"] = "x"
			return nil
		}},
	}
	spec := baseSpec()
	if err := prepareAll(context.Background(), comps, spec, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if spec.Network != "container:side" || spec.DNS != nil {
		t.Errorf("network %q dns %v", spec.Network, spec.DNS)
	}
	var targets []string
	for _, m := range spec.Mounts {
		targets = append(targets, m.Target)
	}
	if !slices.Equal(targets, []string{"/v", "/usr", "/workspace"}) {
		t.Errorf("mounts %v", targets)
	}
	if spec.Env["PATH"] != "/bin:/run/lazaret/bin" || spec.Env["NEW"] != "x" || spec.Env["KEEP"] != "1" {
		t.Errorf("env %v", spec.Env)
	}
	if !slices.Equal(spec.CapAdd, []string{"CHOWN"}) {
		t.Errorf("caps %v", spec.CapAdd)
	}
}

func TestPrepareAllRunsConcurrently(t *testing.T) {
	var running, peak atomic.Int32
	slow := func(context.Context, *podman.ContainerSpec) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
		running.Add(-1)
		return nil
	}
	comps := []sandbox.Component{&fakeComp{"a", slow}, &fakeComp{"b", slow}, &fakeComp{"c", slow}}
	if err := prepareAll(context.Background(), comps, baseSpec(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if peak.Load() < 2 {
		t.Fatalf("Prepares ran one at a time (peak %d)", peak.Load())
	}
}

func TestPrepareAllErrorCancelsOthers(t *testing.T) {
	boom := errors.New("boom")
	comps := []sandbox.Component{
		&fakeComp{"waits", func(ctx context.Context, _ *podman.ContainerSpec) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Second):
				return errors.New("not cancelled")
			}
		}},
		&fakeComp{"fails", func(context.Context, *podman.ContainerSpec) error { return boom }},
	}
	spec := baseSpec()
	err := prepareAll(context.Background(), comps, spec, slog.New(slog.DiscardHandler))
	if !errors.Is(err, boom) || err.Error() != "fails: boom" {
		t.Fatalf("err = %v", err)
	}
}

type deferredComp struct {
	fakeComp
	ready chan error
}

func (d *deferredComp) Ready(ctx context.Context) error {
	select {
	case err := <-d.ready:
		d.ready <- err // later calls see the same outcome
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func gatePath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cgate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "g.sock")
}

func TestStartGateOpensWhenDeferredWorkIsReady(t *testing.T) {
	d := &deferredComp{fakeComp{name: "sa"}, make(chan error, 1)}
	spec := baseSpec()
	sg, err := openGate(context.Background(), []sandbox.Component{&fakeComp{name: "net"}, d}, spec, gatePath(t), time.Now(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	path := spec.Annotations[startgate.Annotation]
	if path == "" {
		t.Fatal("the spec names no gate")
	}
	waited := make(chan error, 1)
	go func() { waited <- startgate.Wait(context.Background(), path) }()
	select {
	case err := <-waited:
		t.Fatalf("the gate opened before the work was ready: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	d.ready <- nil
	if err := <-waited; err != nil {
		t.Fatalf("create after ready: %v", err)
	}
	if err := sg.finish(true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("gate socket left after the run: %v", err)
	}
}

func TestStartGateFailsTheCreateWithTheComponentsError(t *testing.T) {
	d := &deferredComp{fakeComp{name: "stateanchor"}, make(chan error, 1)}
	spec := baseSpec()
	sg, err := openGate(context.Background(), []sandbox.Component{d}, spec, gatePath(t), time.Now(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d.ready <- errors.New("mounting the overlay on /usr: boom")
	werr := startgate.Wait(context.Background(), spec.Annotations[startgate.Annotation])
	if werr == nil || !strings.Contains(werr.Error(), "stateanchor: mounting the overlay on /usr: boom") {
		t.Fatalf("create: %v", werr)
	}
	if err := sg.finish(false); err == nil || !strings.Contains(err.Error(), "stateanchor: mounting") {
		t.Fatalf("finish: %v", err)
	}
}

func TestNoGateWithoutDeferredWork(t *testing.T) {
	spec := baseSpec()
	sg, err := openGate(context.Background(), []sandbox.Component{&fakeComp{name: "net"}}, spec, gatePath(t), time.Now(), slog.New(slog.DiscardHandler))
	if err != nil || sg != nil {
		t.Fatalf("openGate = %v, %v", sg, err)
	}
	if _, ok := spec.Annotations[startgate.Annotation]; ok {
		t.Error("gate annotation without a gate")
	}
	if err := sg.finish(true); err != nil {
		t.Fatal(err)
	}
}

// TestStartGateBypassIsAnError: a run that succeeded although nothing
// waited at the gate (a runtime other than the shim) fails the start.
func TestStartGateBypassIsAnError(t *testing.T) {
	d := &deferredComp{fakeComp{name: "sa"}, make(chan error, 1)}
	d.ready <- nil
	sg, err := openGate(context.Background(), []sandbox.Component{d}, baseSpec(), gatePath(t), time.Now(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := sg.finish(true); !errors.Is(err, ErrGateBypassed) {
		t.Fatalf("finish = %v, want ErrGateBypassed", err)
	}
}
