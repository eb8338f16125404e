package startgate

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func listen(t *testing.T) *Gate {
	t.Helper()
	// A short path: UNIX socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "gate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	g, err := Listen(filepath.Join(dir, "g.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func waitAsync(path string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ch <- Wait(ctx, path)
	}()
	return ch
}

func TestWaitHoldsUntilOpen(t *testing.T) {
	g := listen(t)
	ch := waitAsync(g.Path())
	select {
	case err := <-ch:
		t.Fatalf("Wait returned before Open: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	g.Open(nil)
	if err := <-ch; err != nil {
		t.Fatalf("after Open(nil): %v", err)
	}
	// Later creates pass at once, and a second Open changes nothing.
	g.Open(errors.New("late"))
	if err := <-waitAsync(g.Path()); err != nil {
		t.Fatalf("after Open: %v", err)
	}
}

func TestWaitFailsWithTheReason(t *testing.T) {
	g := listen(t)
	ch := waitAsync(g.Path())
	g.Open(errors.New("state anchor: mounting the overlay\non /usr: boom"))
	err := <-ch
	if err == nil || !strings.Contains(err.Error(), "mounting the overlay on /usr: boom") {
		t.Fatalf("Wait: %v", err)
	}
}

func TestCloseFailsAWaitingCreate(t *testing.T) {
	g := listen(t)
	ch := waitAsync(g.Path())
	time.Sleep(100 * time.Millisecond)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err == nil || !strings.Contains(err.Error(), ErrClosed.Error()) {
		t.Fatalf("Wait after Close: %v", err)
	}
	if _, err := os.Stat(g.Path()); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}
	// No gate at all (a dead coordinator): the create fails.
	if err := <-waitAsync(g.Path()); err == nil {
		t.Fatal("Wait without a gate succeeded")
	}
}

func TestListenReplacesADeadSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "gate")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "g.sock")
	// A dead coordinator's socket file: bound, never unlinked.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	g, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.Open(nil)
	if err := <-waitAsync(path); err != nil {
		t.Fatal(err)
	}
}

func TestFromBundle(t *testing.T) {
	dir := t.TempDir()
	if _, err := FromBundle(dir); err == nil {
		t.Error("no config.json: want an error (fail closed)")
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"ociVersion":"1.0.2","annotations":{"other":"x","` + Annotation + `":"/run/user/1/gate-ab.sock"}}`)
	if p, err := FromBundle(dir); err != nil || p != "/run/user/1/gate-ab.sock" {
		t.Errorf("FromBundle = %q, %v", p, err)
	}
	write(`{"ociVersion":"1.0.2","process":{"args":["true"]}}`)
	if p, err := FromBundle(dir); err != nil || p != "" {
		t.Errorf("no annotation: %q, %v", p, err)
	}
	write(`{"annotations":`)
	if _, err := FromBundle(dir); err == nil {
		t.Error("truncated config.json: want an error (fail closed)")
	}
}
