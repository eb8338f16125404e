package limits

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// fakeHost is a sandbox whose memory the test sets.
type fakeHost struct {
	mu                     sync.Mutex
	mem                    int64
	pauses, resumes, kills int
	ooms                   int
	onOOM                  func(h *fakeHost) // runs under mu
	closed                 bool
}

func (h *fakeHost) used() (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, errors.New("closed")
	}
	return h.mem, nil
}
func (h *fakeHost) set(m int64)  { h.mu.Lock(); h.mem = m; h.mu.Unlock() }
func (h *fakeHost) pause() error { h.mu.Lock(); h.pauses++; h.mu.Unlock(); return nil }
func (h *fakeHost) resume() error {
	h.mu.Lock()
	h.resumes++
	h.mu.Unlock()
	return nil
}
func (h *fakeHost) kill() error { h.mu.Lock(); h.kills++; h.mu.Unlock(); return nil }
func (h *fakeHost) close()      { h.mu.Lock(); h.closed = true; h.mu.Unlock() }
func (h *fakeHost) oomKill(context.Context) (killed, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ooms++
	if h.onOOM != nil {
		h.onOOM(h)
	}
	return killed{PID: 42, RSS: 500 << 20, Comm: "dd"}, nil
}
func (h *fakeHost) counts() (int, int, int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pauses, h.resumes, h.kills, h.ooms
}

type fakeServer struct {
	mu    sync.Mutex
	lines []string
}

func (s *fakeServer) Broadcast(typ string, payload any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if typ == ctl.TypeNetNotice {
		s.lines = append(s.lines, payload.(ctl.NetNotice).Line)
	}
}
func (s *fakeServer) has(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

type fakeAudit struct {
	mu     sync.Mutex
	events []string
}

func (a *fakeAudit) add(_ context.Context, e audit.Entry) (uint64, error) {
	if err := e.Validate(); err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, e.Fields["event"])
	return uint64(len(a.events)), nil
}
func (a *fakeAudit) has(ev string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.events {
		if e == ev {
			return true
		}
	}
	return false
}

// fakeDisk is the free space of one filesystem the test sets.
type fakeDisk struct {
	mu          sync.Mutex
	free, total uint64
}

func (d *fakeDisk) statfs(string) (uint64, uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.free, d.total, nil
}
func (d *fakeDisk) set(f uint64) { d.mu.Lock(); d.free = f; d.mu.Unlock() }

func newTestComponent(t *testing.T, r config.Resources, disk *fakeDisk) (*Component, *fakeHost, *fakeServer, *fakeAudit) {
	t.Helper()
	dir := t.TempDir()
	srv, au := &fakeServer{}, &fakeAudit{}
	c := New(Options{Profile: &config.Profile{Name: "p1", Resources: r},
		Anchor: &domain.Anchor{DataRoot: dir, Workspace: dir}, EscalationEnabled: true, Server: srv, Audit: au.add})
	c.statfs = disk.statfs
	h := &fakeHost{mem: 10 << 20}
	c.attach = func(context.Context, string) (sandboxHost, error) { return h, nil }
	if err := c.Prepare(context.Background(), &podman.ContainerSpec{}); err != nil {
		t.Fatal(err)
	}
	return c, h, srv, au
}

func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatchMemory: at the limit the largest process is killed and every
// terminal told; past the margin the Sentry is stopped, the watch returns
// the stop reason, and BeforeStop kills the stopped Sentry. Control:
// below the limit nothing is killed.
func TestWatchMemory(t *testing.T) {
	disk := &fakeDisk{free: 100 << 30, total: 200 << 30}
	c, h, srv, au := newTestComponent(t, config.Resources{Memory: 512 << 20}, disk)
	h.onOOM = func(h *fakeHost) { h.mem = 20 << 20 }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Watch(ctx) }()
	time.Sleep(120 * time.Millisecond)
	if _, _, _, ooms := h.counts(); ooms != 0 {
		t.Fatal("killed below the limit")
	}
	h.set(520 << 20)
	wait(t, "the OOM kill", func() bool { _, _, _, o := h.counts(); return o == 1 })
	wait(t, "the notice", func() bool { return srv.has("killed process 42 (dd, 500m resident)") })
	if !au.has("oom_kill") {
		t.Fatal("no audit entry for the kill")
	}
	if st := c.Status(); st.Memory.Kills != 1 || st.Memory.Limit != 512<<20 {
		t.Fatalf("status %+v", st.Memory)
	}
	// Defeated: the usage passes the ceiling (no kill frees it).
	h.mu.Lock()
	h.onOOM = nil
	h.mem = 600 << 20
	h.mu.Unlock()
	var err error
	select {
	case err = <-errc:
	case <-time.After(5 * time.Second):
		t.Fatal("no stop past the ceiling")
	}
	var se *StopError
	if !errors.As(err, &se) || !strings.Contains(se.StopReason(), "memory limit 512m exceeded (600m used") || !strings.Contains(se.StopReason(), "profile p1") {
		t.Fatalf("stop reason: %v", err)
	}
	if p, _, k, _ := h.counts(); p != 1 || k != 0 {
		t.Fatalf("pauses %d kills %d, want the Sentry stopped once", p, k)
	}
	c.BeforeStop(context.Background())
	if _, _, k, _ := h.counts(); k != 1 {
		t.Fatal("BeforeStop did not kill the stopped Sentry")
	}
	if !au.has("stopped") {
		t.Fatal("no audit entry for the stop")
	}
	c.Close(context.Background())
}

// TestWatchDisk: free space below the reserve pauses the sandbox with a
// notice saying how it resumes; it resumes above reserve + hysteresis;
// Close resumes a paused sandbox. Control: a zero reserve never pauses.
func TestWatchDisk(t *testing.T) {
	disk := &fakeDisk{free: 10 << 30, total: 20 << 30}
	c, h, srv, au := newTestComponent(t, config.Resources{Memory: 1 << 30, DiskReserve: config.DiskReserve{Bytes: 2 << 30}}, disk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Watch(ctx)
	time.Sleep(150 * time.Millisecond)
	disk.set(2<<30 - 1)
	wait(t, "the pause", func() bool { p, _, _, _ := h.counts(); return p == 1 })
	wait(t, "the notice", func() bool { return srv.has("the sandbox is paused and resumes by itself when 2.2g is free") })
	if st := c.Status(); !st.Paused || len(st.Disk) != 1 || !st.Disk[0].Paused {
		t.Fatalf("status %+v", st)
	}
	disk.set(2<<30 + 100<<20)
	time.Sleep(100 * time.Millisecond)
	if _, r, _, _ := h.counts(); r != 0 {
		t.Fatal("resumed within the hysteresis")
	}
	disk.set(3 << 30)
	wait(t, "the resume", func() bool { _, r, _, _ := h.counts(); return r == 1 })
	// The resume is counted before it is told: wait for the telling.
	wait(t, "the resume told", func() bool { return au.has("paused") && au.has("resumed") && srv.has("runs again") })
	disk.set(1 << 30)
	wait(t, "the second pause", func() bool { p, _, _, _ := h.counts(); return p == 2 })
	c.Close(context.Background())
	if _, r, _, _ := h.counts(); r != 2 {
		t.Fatal("Close did not resume the paused sandbox")
	}

	zero := &fakeDisk{free: 1 << 20, total: 20 << 30}
	c2, h2, _, _ := newTestComponent(t, config.Resources{Memory: 1 << 30}, zero)
	ctx2, cancel2 := context.WithCancel(context.Background())
	go c2.Watch(ctx2)
	time.Sleep(150 * time.Millisecond)
	cancel2()
	if p, _, _, _ := h2.counts(); p != 0 {
		t.Fatal("a zero reserve paused")
	}
}

// TestPrepareDiskErrors: a reserve the filesystem cannot keep, or free
// space already below it, is a start error naming disk_reserve.
func TestPrepareDiskErrors(t *testing.T) {
	for _, c := range []struct {
		r    config.DiskReserve
		free uint64
		want string
	}{
		{config.DiskReserve{Bytes: 30 << 30}, 10 << 30, "larger than the filesystem"},
		{config.DiskReserve{Bytes: 5 << 30}, 4 << 30, "has only 4g free"},
	} {
		dir := t.TempDir()
		comp := New(Options{Profile: &config.Profile{Name: "p1", Resources: config.Resources{DiskReserve: c.r}},
			Anchor: &domain.Anchor{DataRoot: dir, Workspace: dir}, EscalationEnabled: true})
		comp.statfs = (&fakeDisk{free: c.free, total: 20 << 30}).statfs
		err := comp.Prepare(context.Background(), &podman.ContainerSpec{})
		if err == nil || !strings.Contains(err.Error(), "disk_reserve") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("reserve %v free %d: %v", c.r, c.free, err)
		}
	}
}

// TestParseKill: the killer's line is read strictly; its command name is
// escaped.
func TestParseKill(t *testing.T) {
	k, err := parseKill([]byte("killed 12 1048576 dd\x1b[2J\n"))
	if err != nil || k.PID != 12 || k.RSS != 1<<20 || strings.ContainsRune(k.Comm, 0x1b) {
		t.Fatalf("%+v %v", k, err)
	}
	if k, err := parseKill([]byte("killed 12 ? tail\n")); err != nil || k.RSS != -1 {
		t.Fatalf("%+v %v", k, err)
	}
	if k, err := parseKill([]byte("none\n")); err != nil || !k.None {
		t.Fatalf("%+v %v", k, err)
	}
	for _, bad := range []string{"", "killed 1 5 init\n", "killed x 5 a\n", "killed 5 -1 a\n", "killed 5 5 a\nmore\n", "killed 5 5\n", "ok\n"} {
		if _, err := parseKill([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestVerbAgrees: the coordinator runs the verb the client defines.
func TestVerbAgrees(t *testing.T) {
	if OOMKillVerb != "__oomkill" {
		t.Fatal(OOMKillVerb)
	}
}

// TestFreezeWaitsForTheWatch: a Freeze asked before the watch reached the
// sandbox's processes (a fork right after a start) waits for it and
// pauses, rather than answering ErrNotWatched at once; once the watch
// gave up (best-effort) it answers at once.
func TestFreezeWaitsForTheWatch(t *testing.T) {
	c := New(Options{})
	h := &freezeHost{}
	go func() {
		time.Sleep(50 * time.Millisecond)
		c.mu.Lock()
		c.host = h
		c.mu.Unlock()
		c.watched()
	}()
	thaw, err := c.Freeze(t.Context())
	if err != nil || !h.paused {
		t.Fatalf("Freeze before the watch: err %v, paused %v", err, h.paused)
	}
	thaw()
	if h.paused {
		t.Fatal("thaw did not resume")
	}
	gaveUp := New(Options{})
	gaveUp.watched()
	if _, err := gaveUp.Freeze(t.Context()); !errors.Is(err, ErrNotWatched) {
		t.Fatalf("Freeze with no watch: %v", err)
	}
}

type freezeHost struct{ paused bool }

func (h *freezeHost) used() (int64, error)                    { return 0, nil }
func (h *freezeHost) pause() error                            { h.paused = true; return nil }
func (h *freezeHost) resume() error                           { h.paused = false; return nil }
func (h *freezeHost) kill() error                             { return nil }
func (h *freezeHost) oomKill(context.Context) (killed, error) { return killed{}, nil }
func (h *freezeHost) close()                                  {}
