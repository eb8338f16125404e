package sidecar

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/domainlock"
)

// fakeUnpin records the pins SweepEndedSpares unpins and removes their
// files, as netns.Client.Remove does.
type fakeUnpin struct{ removed []string }

func (f *fakeUnpin) Remove(_ context.Context, path string) error {
	f.removed = append(f.removed, filepath.Base(path))
	return os.Remove(path)
}

// TestSweepEndedSpares: only the domain whose spare ended (its socket
// refuses, its coordinator is gone, its lock is free) loses its pin and
// socket; a waiting spare, a live coordinator, a held lock, the caller's
// own domain and names that are not a domain's keep theirs. The ended
// domain's removal is the control: the same files are kept everywhere
// else for the reason named.
func TestSweepEndedSpares(t *testing.T) {
	rt := t.TempDir()
	anchor := func(h string) *domain.Anchor { return &domain.Anchor{RuntimeDir: rt, Hash: h} }
	touch := func(p string) {
		t.Helper()
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	listen := func(p string) net.Listener {
		t.Helper()
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	// deadSocket leaves a socket file nobody listens on, as an exited
	// netd does.
	deadSocket := func(p string) {
		t.Helper()
		l := listen(p)
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
	}

	ended, waiting, running, locked, own := "0123456789ab", "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd"
	onlyPin := "eeeeeeeeeeee"
	for _, h := range []string{ended, waiting, running, locked, own, onlyPin} {
		touch(anchor(h).Netns())
	}
	for _, h := range []string{ended, locked, own} {
		deadSocket(anchor(h).NetdSocket())
	}
	listen(anchor(waiting).NetdSocket())     // a spare waits
	deadSocket(anchor(running).NetdSocket()) // its netd is gone, but
	listen(anchor(running).ControlSocket())  // its coordinator answers
	held, err := domainlock.Open(anchor(locked).LockFile())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if ok, err := held.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	// Not a domain's: left alone whatever they are.
	touch(filepath.Join(rt, "netns-x"))
	touch(filepath.Join(rt, "netns-0123456789abc"))
	deadSocket(filepath.Join(rt, "netd-ZZZZZZZZZZZZ.sock"))

	pm := &fakeUnpin{}
	n := SweepEndedSpares(context.Background(), rt, own, pm, slog.New(slog.DiscardHandler))
	if n != 2 {
		t.Errorf("swept %d domains, want 2 (the ended spare's and the pin alone)", n)
	}
	sort.Strings(pm.removed)
	if want := []string{"netns-" + ended, "netns-" + onlyPin}; !slices.Equal(pm.removed, want) {
		t.Errorf("unpinned %v, want %v", pm.removed, want)
	}
	for _, p := range []string{anchor(ended).Netns(), anchor(ended).NetdSocket(), anchor(onlyPin).Netns()} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s kept", filepath.Base(p))
		}
	}
	keep := []string{
		anchor(waiting).Netns(), anchor(waiting).NetdSocket(),
		anchor(running).Netns(), anchor(running).NetdSocket(),
		anchor(locked).Netns(), anchor(locked).NetdSocket(),
		anchor(own).Netns(), anchor(own).NetdSocket(),
		filepath.Join(rt, "netns-x"), filepath.Join(rt, "netns-0123456789abc"), filepath.Join(rt, "netd-ZZZZZZZZZZZZ.sock"),
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(p), err)
		}
	}

	// Once the lock is free, the locked domain's leftovers go too.
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	if n := SweepEndedSpares(context.Background(), rt, own, pm, slog.New(slog.DiscardHandler)); n != 1 {
		t.Errorf("second sweep: %d domains, want 1", n)
	}
	if _, err := os.Lstat(anchor(locked).Netns()); err == nil {
		t.Error("the unlocked domain's pin kept")
	}
}
