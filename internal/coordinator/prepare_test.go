package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/podman"
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
