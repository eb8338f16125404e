package sidecar

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// fakePodman writes a podman whose `unshare` (the namespace pin) waits
// for the file release to appear and exits with pinStatus, and whose
// other verbs fail (the sidecar's run is not reached in these tests, or
// fails).
func fakePodman(t *testing.T, pinStatus int) (bin, release string) {
	t.Helper()
	dir := t.TempDir()
	release = filepath.Join(dir, "release")
	bin = filepath.Join(dir, "podman")
	script := "#!/bin/sh\nif [ \"$1\" = unshare ]; then\n  while [ ! -e " + release + " ]; do sleep 0.02; done\n  exit " +
		strconv.Itoa(pinStatus) + "\nfi\necho 'Error: fake podman' >&2\nexit 125\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, release
}

func deferredComponent(t *testing.T, bin string) *Component {
	t.Helper()
	prof := &config.Profile{Name: "default"}
	c := NewComponent(prof, testAnchor(t), &podman.Client{Bin: bin}, nil)
	c.o.HostAddrs = func() ([]netip.Addr, error) { return nil, nil }
	return c
}

// TestPrepareDefersThePin: Prepare returns before the namespace is pinned,
// with the spec pointed at the pin's (existing, plain) file; Ready waits
// for the pin. The agent's runtime joins only after Ready (the start gate).
func TestPrepareDefersThePin(t *testing.T) {
	bin, release := fakePodman(t, 0)
	c := deferredComponent(t, bin)
	spec := &podman.ContainerSpec{Network: "none"}
	if err := c.Prepare(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if spec.Network != "ns:"+c.o.Anchor.Netns() {
		t.Fatalf("network %q", spec.Network)
	}
	if fi, err := os.Stat(c.o.Anchor.Netns()); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the pin's file must exist for podman's check: %v", err)
	}
	ready := make(chan error, 1)
	go func() { ready <- c.Ready(context.Background()) }()
	select {
	case err := <-ready:
		t.Fatalf("Ready returned before the namespace was pinned: %v", err)
	case <-time.After(150 * time.Millisecond):
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-ready; err != nil {
		t.Fatalf("Ready after the pin: %v", err)
	}
	// The sidecar's own start (the fake podman fails it) is Started's.
	if err := c.Started(context.Background(), ""); !errors.Is(err, ErrSidecarFailed) {
		t.Errorf("Started = %v, want ErrSidecarFailed", err)
	}
}

// TestFailedPinFailsReady: a namespace that cannot be pinned fails Ready
// (so the gate refuses the agent's create) and Started; Close is clean.
func TestFailedPinFailsReady(t *testing.T) {
	bin, release := fakePodman(t, 1)
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := deferredComponent(t, bin)
	if err := c.Prepare(context.Background(), &podman.ContainerSpec{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(context.Background()); !errors.Is(err, ErrSidecarFailed) {
		t.Errorf("Ready = %v, want ErrSidecarFailed", err)
	}
	if err := c.Started(context.Background(), ""); !errors.Is(err, ErrSidecarFailed) {
		t.Errorf("Started = %v, want ErrSidecarFailed", err)
	}
	if c.started {
		t.Error("a sidecar container is recorded although the namespace never existed")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Logf("Close: %v", err) // the fake podman fails the unpin too
	}
}
