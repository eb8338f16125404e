package connect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/fdsafe/fdprobe"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// The test binary doubles as a stand-in coordinator for the hold-to-bind
// tests (the real one needs podman; the integration suite runs it). With
// LAZARET_TEST_COORD set, it serves the control socket given as its last
// argument, records its arguments in the file named by the variable, and
// exits when its last session leaves.
func TestMain(m *testing.M) {
	fdprobe.Main(os.Args[1:])
	if rec := os.Getenv("LAZARET_TEST_COORD"); rec != "" {
		os.Exit(fakeCoordinator(rec, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeCoordinator(rec string, args []string) int {
	f, err := os.OpenFile(rec, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return 1
	}
	fmt.Fprintln(f, strings.Join(args, " "))
	f.Close()
	sock := args[0]
	// Slow start, so followers really queue on the lock.
	time.Sleep(200 * time.Millisecond)
	ln, err := ctlserver.Listen(sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	srv := ctlserver.NewServer(os.Getuid(), nil)
	var mu sync.Mutex
	refs := 0
	zero := make(chan struct{}, 1)
	srv.Attached = func(*ctlserver.Session) error { mu.Lock(); refs++; mu.Unlock(); return nil }
	srv.Detached = func(*ctlserver.Session) {
		mu.Lock()
		refs--
		if refs == 0 {
			select {
			case zero <- struct{}{}:
			default:
			}
		}
		mu.Unlock()
	}
	go srv.Serve(ln)
	select {
	case <-zero:
	case <-time.After(20 * time.Second):
	}
	srv.Close()
	os.Remove(sock)
	return 0
}

func testAnchor(t *testing.T) *domain.Anchor {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	rt := filepath.Join(dir, "run")
	if err := domain.EnsurePrivateDir(rt); err != nil {
		t.Fatal(err)
	}
	a, err := domain.New("default", ws, filepath.Join(dir, "data"), rt, "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func testSpawn(t *testing.T, a *domain.Anchor) (Spawn, string) {
	rec := filepath.Join(t.TempDir(), "spawns")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LAZARET_TEST_COORD", rec)
	return Spawn{Exe: exe, Args: []string{a.ControlSocket()}}, rec
}

func spawns(t *testing.T, rec string) []string {
	data, err := os.ReadFile(rec)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func sessionHello(i int) ctl.Hello {
	return ctl.Hello{Session: &ctl.SessionInfo{ID: fmt.Sprintf("%032x", i+1)}}
}

// TestConnectConcurrentLeaders: eight CLIs at once start one coordinator
// and all attach to it.
func TestConnectConcurrentLeaders(t *testing.T) {
	a := testAnchor(t)
	spawn, rec := testSpawn(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 8
	clients := make([]*ctl.Client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clients[i] = ctl.NewClient(nil)
			errs[i] = Connect(ctx, a, clients[i], sessionHello(i), spawn, nil)
		}()
	}
	wg.Wait()
	pids := map[int]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		pids[clients[i].Reply.PID] = true
	}
	if got := spawns(t, rec); len(got) != 1 || len(pids) != 1 {
		t.Fatalf("%d coordinators spawned (%v), %d answered", len(got), got, len(pids))
	}
	for _, c := range clients {
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for fileExists(a.ControlSocket()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if fileExists(a.ControlSocket()) {
		t.Fatal("the coordinator did not leave after the last client")
	}
	if !fileExists(a.LockFile()) {
		t.Fatal("the lock file was unlinked")
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

// TestConnectStaleSocket: a socket nobody answers on is removed and the
// new coordinator is told to recover; with a live coordinator, nothing is
// spawned (the positive control of the spawn count).
func TestConnectStaleSocket(t *testing.T) {
	a := testAnchor(t)
	spawn, rec := testSpawn(t, a)
	// A dead socket: bound, then its listener closed without unlinking.
	ln, err := ctlserver.Listen(a.ControlSocket())
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if !fileExists(a.ControlSocket()) {
		t.Fatal("setup: no stale socket")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := ctl.NewClient(nil)
	if err := Connect(ctx, a, c, sessionHello(0), spawn, nil); err != nil {
		t.Fatal(err)
	}
	got := spawns(t, rec)
	if len(got) != 1 || !strings.HasSuffix(got[0], RecoverFlag) {
		t.Fatalf("spawns %q, want one with %s", got, RecoverFlag)
	}
	c2 := ctl.NewClient(nil)
	if err := Connect(ctx, a, c2, sessionHello(1), spawn, nil); err != nil {
		t.Fatal(err)
	}
	if got := spawns(t, rec); len(got) != 1 {
		t.Fatalf("a live coordinator was replaced: %q", got)
	}
	c.Close()
	c2.Close()
}

func TestDialNotRunning(t *testing.T) {
	a := testAnchor(t)
	_, err := Dial(context.Background(), a.ControlSocket(), nil)
	if !errors.Is(err, ErrNotRunning) {
		t.Fatalf("err = %v", err)
	}
}
