package unixsock_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/unixsock"
)

// oldListen is how ctlserver.Listen, sidecar.listenControl and netd made their
// sockets private before: through the process-wide umask.
func oldListen(path string) (*net.UnixListener, error) {
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	return ln, err
}

// raceMkdir binds sockets with listen, up to limit times (or, with
// stopOnBad, until the first damaged directory), while another goroutine
// creates 0700 directories, as the coordinator's components do while its
// control socket opens. It returns the directories that did not come out
// 0700 and the number of binds.
func raceMkdir(t *testing.T, listen func(string) (*net.UnixListener, error), limit int, stopOnBad bool) ([]string, int) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	sockDir, dirs := privateDir(t), t.TempDir()
	var (
		stop atomic.Bool
		mu   sync.Mutex
		bad  []string
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			d := filepath.Join(dirs, fmt.Sprint(i), "gitsentry")
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Error(err)
				return
			}
			for _, p := range []string{filepath.Dir(d), d} {
				fi, err := os.Lstat(p)
				if err != nil {
					t.Error(err)
					return
				}
				if fi.Mode().Perm() != 0o700 {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s %v", p, fi.Mode().Perm()))
					mu.Unlock()
				}
			}
		}
	}()
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	n := 0
	for ; n < limit; n++ {
		mu.Lock()
		done := stopOnBad && len(bad) > 0
		mu.Unlock()
		if done {
			break
		}
		ln, err := listen(filepath.Join(sockDir, fmt.Sprint(n)))
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
	}
	stop.Store(true)
	wg.Wait()
	return bad, n
}

// TestListenLeavesUmaskAlone: directories made while ctlserver.Listen binds
// sockets keep their 0700. Positive control: the umask pattern it replaces makes
// some of them 0600 (no search permission: unusable by their owner).
func TestListenLeavesUmaskAlone(t *testing.T) {
	bad, n := raceMkdir(t, oldListen, 1_000_000, true)
	if len(bad) == 0 {
		t.Fatalf("positive control: %d binds through the umask damaged no directory", n)
	}
	t.Logf("positive control: %d binds through the umask damaged %s", n, bad[0])
	if bad, n := raceMkdir(t, ctlserver.Listen, 300, false); len(bad) != 0 {
		t.Fatalf("%d binds damaged %d directories, e.g. %s", n, len(bad), bad[0])
	}
}

// privateDir is a fresh 0700 directory (t.TempDir's are 0777 &^ umask).
func privateDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestListenMode(t *testing.T) {
	dir := privateDir(t)
	path := filepath.Join(dir, "s")
	ln, err := unixsock.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}
	if _, err := unixsock.Listen(path); err == nil {
		t.Fatal("bound over an existing socket")
	}
}

// TestListenReplacing: a socket a dead process left is replaced; any other
// file at the path is refused and kept (control: plain Listen refuses the
// stale socket, so the replacement is what made the bind work).
func TestListenReplacing(t *testing.T) {
	path := filepath.Join(privateDir(t), "s.sock")
	old, err := unixsock.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close() // the stale socket stays, as a killed process leaves it
	if _, err := unixsock.Listen(path); err == nil {
		t.Fatal("control: Listen bound over a stale socket")
	}
	ln, err := unixsock.ListenReplacing(path)
	if err != nil {
		t.Fatalf("ListenReplacing over a stale socket: %v", err)
	}
	ln.Close()

	file := filepath.Join(privateDir(t), "data")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := unixsock.ListenReplacing(file); err == nil {
		t.Fatal("ListenReplacing replaced a regular file")
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep" {
		t.Fatalf("the file was touched: %q %v", b, err)
	}
}
