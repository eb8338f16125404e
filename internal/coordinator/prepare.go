package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/engine/startgate"
)

// prepareAll runs every component's Prepare concurrently, each on its own
// copy of spec, then merges what each one changed into spec in component
// order. The components are independent (the network sidecar, the State
// Anchor's overlays, Git Sentry's clone, the Trust Anchor) and most of
// their time is spent waiting on podman, so a cold start costs the
// slowest of them rather than their sum. The first error cancels the
// others; every component has been started either way, so all of them are
// owed a Close.
func prepareAll(ctx context.Context, comps []sandbox.Component, spec *podman.ContainerSpec, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	copies := make([]*podman.ContainerSpec, len(comps))
	errs := make(chan error, len(comps))
	for i, comp := range comps {
		copies[i] = cloneSpec(spec)
		go func() {
			start := time.Now()
			err := comp.Prepare(ctx, copies[i])
			log.Info("component prepared", "component", comp.Name(), "took", time.Since(start).Round(time.Millisecond), "ok", err == nil)
			if err != nil {
				err = fmt.Errorf("%s: %w", comp.Name(), err)
			}
			// Sent before cancelling, so the cause is received before the
			// cancellations it provokes.
			errs <- err
			if err != nil {
				cancel()
			}
		}()
	}
	var first error
	for range comps {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	base := cloneSpec(spec)
	for _, c := range copies {
		mergeSpec(spec, base, c)
	}
	return nil
}

func cloneSpec(s *podman.ContainerSpec) *podman.ContainerSpec {
	c := *s
	c.Labels = maps.Clone(s.Labels)
	c.Annotations = maps.Clone(s.Annotations)
	c.Env = maps.Clone(s.Env)
	c.Mounts = slices.Clone(s.Mounts)
	for i := range c.Mounts {
		c.Mounts[i].Options = slices.Clone(s.Mounts[i].Options)
	}
	c.CapDrop = slices.Clone(s.CapDrop)
	c.CapAdd = slices.Clone(s.CapAdd)
	c.SecurityOpt = slices.Clone(s.SecurityOpt)
	c.DNS = slices.Clone(s.DNS)
	c.ExtraArgs = slices.Clone(s.ExtraArgs)
	c.Command = slices.Clone(s.Command)
	return &c
}

// mergeSpec applies to dst what changed from base to changed: scalar
// fields that differ are set, map keys added, changed or removed are
// applied, slices that grew from base get the new elements appended and
// slices otherwise changed are replaced.
func mergeSpec(dst, base, changed *podman.ContainerSpec) {
	scalar := func(d *string, b, c string) {
		if b != c {
			*d = c
		}
	}
	scalar(&dst.Name, base.Name, changed.Name)
	scalar(&dst.Image, base.Image, changed.Image)
	scalar(&dst.Runtime, base.Runtime, changed.Runtime)
	scalar(&dst.Network, base.Network, changed.Network)
	scalar(&dst.Hostname, base.Hostname, changed.Hostname)
	scalar(&dst.Workdir, base.Workdir, changed.Workdir)
	scalar(&dst.User, base.User, changed.User)
	if base.PidsLimit != changed.PidsLimit {
		dst.PidsLimit = changed.PidsLimit
	}
	dst.Labels = mergeMap(dst.Labels, base.Labels, changed.Labels)
	dst.Annotations = mergeMap(dst.Annotations, base.Annotations, changed.Annotations)
	dst.Env = mergeMap(dst.Env, base.Env, changed.Env)
	dst.Mounts = mergeSlice(dst.Mounts, base.Mounts, changed.Mounts)
	dst.CapDrop = mergeSlice(dst.CapDrop, base.CapDrop, changed.CapDrop)
	dst.CapAdd = mergeSlice(dst.CapAdd, base.CapAdd, changed.CapAdd)
	dst.SecurityOpt = mergeSlice(dst.SecurityOpt, base.SecurityOpt, changed.SecurityOpt)
	dst.DNS = mergeSlice(dst.DNS, base.DNS, changed.DNS)
	dst.ExtraArgs = mergeSlice(dst.ExtraArgs, base.ExtraArgs, changed.ExtraArgs)
	dst.Command = mergeSlice(dst.Command, base.Command, changed.Command)
}

func mergeMap(dst, base, changed map[string]string) map[string]string {
	for k, v := range changed {
		if bv, ok := base[k]; !ok || bv != v {
			if dst == nil {
				dst = map[string]string{}
			}
			dst[k] = v
		}
	}
	for k := range base {
		if _, ok := changed[k]; !ok {
			delete(dst, k)
		}
	}
	return dst
}

func mergeSlice[T any](dst, base, changed []T) []T {
	if len(changed) >= len(base) {
		prefix := true
		for i := range base {
			if !reflect.DeepEqual(base[i], changed[i]) {
				prefix = false
				break
			}
		}
		if prefix {
			return append(dst, changed[len(base):]...)
		}
	}
	return slices.Clone(changed)
}

// startGateEnv set to "off" makes the coordinator wait for the deferred
// work before podman run instead of at the start gate.
const startGateEnv = "LAZARET_START_GATE"

// startGate is the start gate of one container run: it opens once every
// Deferred component is ready (internal/engine/startgate). A nil *startGate (no
// component deferred any work) does nothing.
type startGate struct {
	gate   *startgate.Gate
	result chan error
}

// openGate listens on path when a component deferred work past Prepare,
// names the gate in spec and opens it when they are all ready.
func openGate(ctx context.Context, comps []sandbox.Component, spec *podman.ContainerSpec, path string, runStart time.Time, log *slog.Logger) (*startGate, error) {
	var deferred []sandbox.Component
	for _, comp := range comps {
		if _, ok := comp.(sandbox.Deferred); ok {
			deferred = append(deferred, comp)
		}
	}
	if len(deferred) == 0 {
		return nil, nil
	}
	if os.Getenv(startGateEnv) == "off" {
		// The sequential start, for comparison (bench/lifecycle).
		for _, comp := range deferred {
			if err := comp.(sandbox.Deferred).Ready(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", comp.Name(), err)
			}
		}
		return nil, nil
	}
	g, err := startgate.Listen(path)
	if err != nil {
		// Nothing waits yet: let the deferred work end before Close.
		for _, comp := range deferred {
			_ = comp.(sandbox.Deferred).Ready(ctx)
		}
		return nil, err
	}
	if spec.Annotations == nil {
		spec.Annotations = map[string]string{}
	}
	spec.Annotations[startgate.Annotation] = g.Path()
	sg := &startGate{gate: g, result: make(chan error, 1)}
	go func() {
		var first error
		for _, comp := range deferred {
			err := comp.(sandbox.Deferred).Ready(ctx)
			log.Info("component ready", "component", comp.Name(), "after_run", time.Since(runStart).Round(time.Millisecond), "ok", err == nil)
			if err != nil && first == nil {
				first = fmt.Errorf("%s: %w", comp.Name(), err)
			}
		}
		g.Open(first)
		sg.result <- first
	}()
	return sg, nil
}

// ErrGateBypassed: the container started without its runtime waiting at
// the start gate (LAZARET_SHIM names a runtime that is not lazaret's
// shim), so its mounts may have been made before their sources.
var ErrGateBypassed = errors.New("the sandbox's runtime did not wait at the start gate (is LAZARET_SHIM lazaret's lazaret-runsc?)")

// finish waits for the deferred work's outcome (also when the run failed
// before its create, so that Close never races the work) and closes the
// gate. runOK is whether podman run succeeded: a run that succeeded
// without passing the gate is an error (the teardown removes it).
func (sg *startGate) finish(runOK bool) error {
	if sg == nil {
		return nil
	}
	err := <-sg.result
	_ = sg.gate.Close()
	if err == nil && runOK && sg.gate.Passed() == 0 {
		return ErrGateBypassed
	}
	return err
}
