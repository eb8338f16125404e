package escclient

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// inProcess starts daemons as goroutines (a test binary cannot re-exec
// itself as one); running counts those serving, served gets their results.
type inProcess struct {
	running atomic.Int32
	served  chan error
}

func newInProcess() *inProcess { return &inProcess{served: make(chan error, 4)} }

func (p *inProcess) start(dir string) error {
	p.running.Add(1)
	go func() {
		err := serve(dir, relayIdle, func(string, ...any) {})
		p.running.Add(-1)
		p.served <- err
	}()
	return nil
}

// testBridge is one bridge run in-process, linked to a host.
type testBridge struct {
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	done   chan error // the bridge's result
	linked chan error // Host.Link's
}

// link runs a bridge for dir and links h over it.
func link(h *escrelay.Host, dir string, start func(string) error) *testBridge {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	b := &testBridge{stdin: inW, stdout: outR, done: make(chan error, 1), linked: make(chan error, 1)}
	go func() {
		err := bridge(dir, inR, outW, start)
		outW.Close()
		inR.Close()
		b.done <- err
	}()
	go func() { b.linked <- h.Link(inW, outR) }()
	return b
}

// kill ends the bridge as a lost exec stream does and waits for it.
func (b *testBridge) kill(t *testing.T) {
	t.Helper()
	b.stdin.Close()
	b.stdout.Close()
	if err := <-b.done; err != nil {
		t.Fatalf("bridge: %v", err)
	}
	<-b.linked
}

func newHost(t *testing.T) *escrelay.Host {
	t.Helper()
	h := escrelay.NewHost()
	if err := h.SetBundle([]byte("PEM")); err != nil {
		t.Fatal(err)
	}
	return h
}

func waitReady(t *testing.T, h *escrelay.Host) {
	t.Helper()
	select {
	case <-h.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("the relay never said Ready")
	}
}

func acceptOne(t *testing.T, h *escrelay.Host) net.Conn {
	t.Helper()
	got := make(chan net.Conn, 1)
	go func() {
		if c, err := h.Accept(); err == nil {
			got <- c
		}
	}()
	select {
	case c := <-got:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("no connection reached the host")
		return nil
	}
}

func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read: %v (%q)", err, b)
	}
	return string(b)
}

func dialSock(t *testing.T, dir string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(dir, escrelay.Socket))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// relaySurvives is the whole life of a session's relay, with bridges
// started by link (in-process or the real binary) and killed by kill: the
// bundle and the socket, a request waiting for its answer across a lost
// link, one made while no host is linked, and End.
func relaySurvives(t *testing.T, dir string, link func(h *escrelay.Host) func(), ended func()) {
	h := newHost(t)
	kill := link(h)
	waitReady(t, h)
	fi, err := os.Stat(filepath.Join(dir, escrelay.TLSDir, trust.BundleFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("bundle: %v %v", fi, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("DIR: %v %v", fi, err)
	}
	first := dialSock(t, dir)
	_, _ = first.Write([]byte("request"))
	server := acceptOne(t, h)
	if got := readN(t, server, 7); got != "request" {
		t.Fatalf("host read %q", got)
	}
	kill() // the laptop sleeps: the answer and a new request wait
	go func() { _, _ = server.Write([]byte("answer")); server.Close() }()
	second := dialSock(t, dir)
	_, _ = second.Write([]byte("while away"))
	time.Sleep(100 * time.Millisecond)
	kill = link(h)
	if got := readN(t, first, 6); got != "answer" {
		t.Fatalf("client read %q", got)
	}
	if got := readN(t, acceptOne(t, h), 10); got != "while away" {
		t.Fatalf("host read %q", got)
	}
	h.End()
	ended()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DIR left behind: %v", err)
	}
	_ = second.SetReadDeadline(time.Now().Add(20 * time.Second))
	if b, err := io.ReadAll(second); err != nil || len(b) != 0 {
		t.Fatalf("client after End: %q, %v", b, err)
	}
	kill()
}

// TestRelay: the daemon in-process, its bridges as goroutines.
func TestRelay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "S")
	p := newInProcess()
	relaySurvives(t, dir, func(h *escrelay.Host) func() {
		b := link(h, dir, p.start)
		return func() { b.kill(t) }
	}, func() {
		select {
		case err := <-p.served:
			if err != nil {
				t.Fatalf("daemon: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the daemon did not end")
		}
	})
	if n := p.running.Load(); n != 0 {
		t.Fatalf("%d daemons left", n)
	}
}

// TestRelayOneDaemon: bridges starting daemons at once end with one, and
// a daemon started while one serves returns at once.
func TestRelayOneDaemon(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "S")
	p := newInProcess()
	h1, h2 := newHost(t), newHost(t)
	b1, b2 := link(h1, dir, p.start), link(h2, dir, p.start)
	select { // the later link replaces the earlier, which may never see Ready
	case <-h1.Ready():
	case <-h2.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("no Ready")
	}
	second := make(chan error, 1)
	go func() { second <- serve(dir, relayIdle, func(string, ...any) {}) }()
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("a second daemon: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second daemon serves")
	}
	for end := time.Now().Add(10 * time.Second); p.running.Load() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d daemons serve", p.running.Load())
		}
	}
	b1.kill(t)
	b2.kill(t)
	h := newHost(t)
	b := link(h, dir, p.start)
	waitReady(t, h)
	h.End()
	if err := <-p.served; err != nil {
		t.Fatalf("daemon: %v", err)
	}
	b.kill(t)
}

// TestRelayNeedsBundleFirst: a link that does not start with the bundle
// is dropped (its bridge ends); a relative DIR is a usage error.
func TestRelayNeedsBundleFirst(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "S")
	var in bytes.Buffer
	_ = escrelay.Write(&in, escrelay.Frame{Type: escrelay.Data, ID: 1})
	p := newInProcess()
	if err := bridge(dir, &in, io.Discard, p.start); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, escrelay.Socket)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket listens without a bundle: %v", err)
	}
	if code := RelayMain([]string{"relative"}, &in, io.Discard, io.Discard); code != ExitUsage {
		t.Fatalf("relative DIR: exit %d", code)
	}
	if code := RelayServeMain([]string{"relative"}, io.Discard); code != ExitUsage {
		t.Fatalf("relative DIR: exit %d", code)
	}
	h := newHost(t)
	b := link(h, dir, p.start)
	waitReady(t, h)
	h.End()
	b.kill(t)
}

// TestRelayBinary: the real program: the bridge starts the daemon as a
// process of its own, which survives the bridge's SIGKILL and a SIGHUP,
// and ends at End.
func TestRelayBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lazaret-escalate-go")
	}
	bin := filepath.Join(t.TempDir(), "lazaret-escalate-go")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/lazaret-escalate-go").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "S")
	var daemon int
	relaySurvives(t, dir, func(h *escrelay.Host) func() {
		cmd := exec.Command(bin, RelayVerb, dir)
		w, _ := cmd.StdinPipe()
		r, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		linked := make(chan error, 1)
		go func() { linked <- h.Link(w, r) }()
		return func() {
			if daemon == 0 {
				daemon = daemonPID(t, dir)
				if daemon == 0 {
					t.Fatal("no daemon process")
				}
				checkFDs(t, daemon)
				_ = syscall.Kill(daemon, syscall.SIGHUP)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			<-linked
		}
	}, func() {
		for end := time.Now().Add(20 * time.Second); daemonPID(t, dir) != 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the daemon did not exit")
			}
		}
	})
}

// checkFDs: the daemon holds none of its bridge's pipes.
func checkFDs(t *testing.T, pid int) {
	t.Helper()
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	if len(fds) == 0 {
		t.Fatal("no descriptors seen")
	}
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); strings.HasPrefix(l, "pipe:") {
			t.Errorf("the daemon holds %s: %s", fd, l)
		}
	}
}

// daemonPID finds the daemon of dir in /proc (0: none).
func daemonPID(t *testing.T, dir string) int {
	t.Helper()
	want := RelayServeVerb + "\x00" + dir + "\x00"
	ms, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, m := range ms {
		b, err := os.ReadFile(m)
		if err == nil && strings.HasSuffix(string(b), want) {
			var pid int
			if _, err := fmt.Sscanf(m, "/proc/%d/cmdline", &pid); err == nil {
				if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(st), ") Z ") {
					return pid
				}
			}
		}
	}
	return 0
}

// TestInstall copies the two binaries beside the executable, 0555.
func TestInstall(t *testing.T) {
	self, _ := os.Executable()
	dir := filepath.Dir(self)
	for _, n := range []string{escrelay.FrontEndBinary, escrelay.InstallerBinary} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o755); err != nil {
				t.Skip("cannot place the binaries beside the test:", err)
			}
			defer os.Remove(filepath.Join(dir, n))
		}
	}
	out := t.TempDir()
	if code := InstallMain([]string{out}, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, n := range []string{escrelay.FrontEndBinary, escrelay.InstallerBinary} {
		fi, err := os.Stat(filepath.Join(out, n))
		if err != nil || fi.Mode().Perm() != 0o555 {
			t.Errorf("%s: %v %v", n, fi, err)
		}
	}
}

// TestRelayIdleEnds: a daemon no host links to for its idle time ends,
// closing the agent's waiting connections and removing DIR (lazaret-kube
// is gone for good); while a link runs it stays past that time (the
// control), and a connection made meanwhile is carried.
func TestRelayIdleEnds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "S")
	const idle = 300 * time.Millisecond
	served := make(chan error, 1)
	start := func(dir string) error {
		go func() { served <- serve(dir, idle, func(string, ...any) {}) }()
		return nil
	}
	h := newHost(t)
	b := link(h, dir, start)
	waitReady(t, h)
	select {
	case err := <-served:
		t.Fatalf("control: the daemon ended while linked: %v", err)
	case <-time.After(4 * idle):
	}
	waiting, err := net.Dial("unix", filepath.Join(dir, escrelay.Socket))
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	b.kill(t)
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("daemon: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not end without a link")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DIR left: %v", err)
	}
	_ = waiting.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := waiting.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the waiting connection was not closed: %v", err)
	}
}
