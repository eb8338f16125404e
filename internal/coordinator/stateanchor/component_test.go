package stateanchor

import (
	"context"
	"errors"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/podman"
	"github.com/lazaret-dev/lazaret/internal/statestore"
)

func TestDriverFor(t *testing.T) {
	c := New(Options{})
	for _, tc := range []struct {
		fresh bool
		prev  *statestore.Record
		opt   string
		want  string
	}{
		{true, nil, "", DriverAuto},
		{true, nil, DriverFuse, DriverFuse},
		{false, nil, "", DriverFuse},                                                  // changes of unknown origin
		{false, &statestore.Record{}, DriverOverlay, DriverFuse},                      // first-version record
		{false, &statestore.Record{Driver: DriverOverlay}, DriverFuse, DriverOverlay}, // keeps its driver
		{false, &statestore.Record{Driver: DriverFuse}, "", DriverFuse},
	} {
		c.opt.Driver = tc.opt
		if got := c.driverFor(tc.fresh, tc.prev); got != tc.want {
			t.Errorf("driverFor(%v, %+v) with %q = %q, want %q", tc.fresh, tc.prev, tc.opt, got, tc.want)
		}
	}
}

func TestPrepareRefusesBadInput(t *testing.T) {
	spec := &podman.ContainerSpec{}
	if err := New(Options{Dirs: []string{"/usr", "/usr/lib"}}).Prepare(context.Background(), spec); !errors.Is(err, statestore.ErrBadDir) {
		t.Errorf("nested dirs: %v", err)
	}
	if err := New(Options{Dirs: []string{"/usr"}, Driver: "zfs"}).Prepare(context.Background(), spec); err == nil {
		t.Error("unknown driver accepted")
	}
	// No persistent dirs: nothing to do, no podman needed.
	if err := New(Options{}).Prepare(context.Background(), spec); err != nil || len(spec.Mounts) != 0 {
		t.Errorf("no dirs: %v %v", err, spec.Mounts)
	}
	if err := New(Options{}).Close(context.Background()); err != nil {
		t.Errorf("close without prepare: %v", err)
	}
}
