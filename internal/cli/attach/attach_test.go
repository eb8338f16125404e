package attach

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

func devNull(t *testing.T) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestPlainExitCodes(t *testing.T) {
	null := devNull(t)
	for cmdline, want := range map[string]int{"exit 0": 0, "exit 7": 7, "kill -TERM $$": 128 + 15} {
		code, err := Run(exec.Command("sh", "-c", cmdline), Options{Stdin: null, Stdout: null, Stderr: null})
		if err != nil || code != want {
			t.Errorf("%s: code %d err %v, want %d", cmdline, code, err, want)
		}
	}
	if _, err := Run(exec.Command("/nonexistent/x"), Options{Stdin: null, Stdout: null, Stderr: null}); err == nil {
		t.Error("a command that cannot start gave no error")
	}
}

// TestPlainSignalHook: a SIGINT lazaret receives goes to the Signal hook
// (which delivers it inside the sandbox), not to podman.
func TestPlainSignalHook(t *testing.T) {
	null := devNull(t)
	cmd := exec.Command("sleep", "30")
	var mu sync.Mutex
	var got []os.Signal
	opts := Options{Stdin: null, Stdout: null, Stderr: null, Signal: func(s os.Signal) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
		_ = cmd.Process.Signal(syscall.SIGTERM) // the "sandboxed" command ends
	}}
	go func() {
		time.Sleep(300 * time.Millisecond) // Run has started sleep by then
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	}()
	code, err := Run(cmd, opts)
	if err != nil || code != 128+15 {
		t.Fatalf("code %d err %v", code, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != syscall.SIGINT {
		t.Fatalf("hook got %v", got)
	}
	if !cmd.SysProcAttr.Setpgid {
		t.Error("podman not in its own process group: a terminal Ctrl-C would reach it")
	}
}

// TestTTYRestoresTerminal runs a command under a PTY with a terminal as
// stdin: raw mode while it runs (checked when the command says it is
// running, then it is released by a key), the original mode after; the
// command sees terminals and its exit code comes back.
func TestTTYRestoresTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if before.Lflag&unix.ICANON == 0 {
		t.Fatal("setup: terminal not in canonical mode")
	}
	raw := make(chan bool, 1)
	go func() { // the user's side of the outer terminal
		reported := false
		var seen []byte
		b := make([]byte, 1024)
		for {
			n, err := ptmx.Read(b)
			if err != nil {
				return
			}
			seen = append(seen, b[:n]...)
			if !reported && strings.Contains(string(seen), "ready") {
				st, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
				raw <- err == nil && st.Lflag&unix.ICANON == 0
				reported = true
				_, _ = ptmx.Write([]byte("\r"))
			}
		}
	}()
	cmd := exec.Command("sh", "-c", "echo ready; read x; test -t 0 && test -t 1 && exit 4; exit 9")
	done := make(chan struct{})
	var code int
	var runErr error
	go func() {
		code, runErr = Run(cmd, Options{TTY: true, Stdin: tty, Stdout: tty, Stderr: tty})
		close(done)
	}()
	select {
	case ok := <-raw:
		if !ok {
			t.Error("the terminal was not in raw mode while the command ran")
		}
	case <-time.After(time.Minute):
		t.Fatal("the command never said ready")
	}
	<-done
	if runErr != nil || code != 4 {
		t.Fatalf("code %d err %v (want 4: the command saw terminals)", code, runErr)
	}
	after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Fatalf("terminal mode not restored:\nbefore %+v\nafter  %+v", before, after)
	}
}

// fdWiring hands the streams to the command as its descriptors 3, 4, 5
// (the way runsc exec's wiring passes them on) and records its calls.
type fdWiring struct {
	cmd   *exec.Cmd
	calls []string
}

func (w *fdWiring) Wire(in, out, errOut *os.File, tty bool) (int, error) {
	w.calls = append(w.calls, "wire")
	w.cmd.ExtraFiles = append(w.cmd.ExtraFiles, in, out, errOut)
	return 3, nil
}
func (w *fdWiring) Started() { w.calls = append(w.calls, "started") }
func (w *fdWiring) Done()    { w.calls = append(w.calls, "done") }

func TestWiringPlain(t *testing.T) {
	inR, inW, _ := os.Pipe()
	_, _ = inW.WriteString("data\n")
	inW.Close()
	defer inR.Close()
	out, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("sh", "-c", "cat <&3 >&4; exit 3")
	w := &fdWiring{cmd: cmd}
	// The command's own stdin/stdout stay unset: only the wiring's
	// descriptors carry the data.
	code, err := Run(cmd, Options{Stdin: inR, Stdout: out, Stderr: out, Wiring: w})
	if err != nil || code != 3 {
		t.Fatalf("code %d err %v", code, err)
	}
	if b, _ := os.ReadFile(out.Name()); string(b) != "data\n" {
		t.Errorf("output %q", b)
	}
	if strings.Join(w.calls, ",") != "wire,started,done" {
		t.Errorf("calls %v", w.calls)
	}
}

func TestWiringTTY(t *testing.T) {
	null := devNull(t)
	cmd := exec.Command("sh", "-c", "test -t 3 && test -t 4 && exit 4; exit 9")
	w := &fdWiring{cmd: cmd}
	code, err := Run(cmd, Options{TTY: true, Stdin: null, Stdout: null, Stderr: null, Wiring: w})
	if err != nil || code != 4 {
		t.Fatalf("code %d err %v (want 4: the wired descriptors are the PTY)", code, err)
	}
	if strings.Join(w.calls, ",") != "wire,started,done" {
		t.Errorf("calls %v", w.calls)
	}
}
