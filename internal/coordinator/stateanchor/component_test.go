package stateanchor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
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

// TestPrepareRefusesOpenPath: a start whose path to the upper dirs other
// users can search is refused with the one-line fix before the State
// Anchor creates, seals, locks or runs anything (the podman client is a
// zero one: no call may reach it), for both persist modes.
func TestPrepareRefusesOpenPath(t *testing.T) {
	for _, persist := range []string{config.PersistProfile, config.PersistWorkspace} {
		t.Run(persist, func(t *testing.T) {
			base := t.TempDir()
			for _, p := range []string{filepath.Dir(base), base} {
				if err := os.Chmod(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ws := filepath.Join(base, "ws")
			os.Mkdir(ws, 0o755)
			a, err := domain.New("claude", ws, filepath.Join(base, "data"), filepath.Join(base, "run"), "")
			if err != nil {
				t.Fatal(err)
			}
			root := statestore.Locate(a, persist).Root
			for p := root; p != base; p = filepath.Dir(p) {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				os.Chmod(p, 0o755)
			}
			c := New(Options{Anchor: a, Dirs: []string{"/usr"}, Podman: &podman.Client{Bin: "/nonexistent/podman"}, Persist: persist})
			err = c.Prepare(context.Background(), &podman.ContainerSpec{})
			var ee *statestore.ExposedError
			if !errors.As(err, &ee) || ee.Dir != root || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want a one-line refusal naming %s, got %v", root, err)
			}
			names, _ := os.ReadDir(root)
			fi, _ := os.Lstat(root)
			if len(names) != 0 || fi.Mode().Perm() != 0o755 {
				t.Errorf("the refused start changed the overlay root: mode %v, entries %v", fi.Mode(), names)
			}
			if _, err := os.Lstat(statestore.SideFile(root, "lock")); err == nil {
				t.Error("the refused start took the profile lock")
			}
			if err := c.Close(context.Background()); err != nil {
				t.Errorf("close after the refusal: %v", err)
			}
		})
	}
}
