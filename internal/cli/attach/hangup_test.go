package attach

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/ptyfd"
)

// userTerm is the user's terminal: a real PTY in raw mode whose master
// (the emulator's side) can really be closed while it is being read (a
// pollable file: ptytest's blocking master would stay open until its
// pending read returned, which a silent session never makes it do).
type userTerm struct {
	Ptmx, TTY *os.File
	mu        sync.Mutex
	out       []byte
}

func openTerm(t *testing.T) *userTerm {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	_ = pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120})
	if _, err := term.MakeRaw(int(tty.Fd())); err != nil {
		t.Fatal(err)
	}
	if ptmx, err = ptyfd.Pollable(ptmx); err != nil {
		t.Fatal(err)
	}
	tm := &userTerm{Ptmx: ptmx, TTY: tty}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			tm.mu.Lock()
			tm.out = append(tm.out, buf[:n]...)
			tm.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { tty.Close(); ptmx.Close() })
	return tm
}

func (tm *userTerm) Output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return string(tm.out)
}

// WaitFor waits (up to 10 s) until the terminal showed s.
func (tm *userTerm) WaitFor(t *testing.T, s string) {
	t.Helper()
	for range 1000 {
		if strings.Contains(tm.Output(), s) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("terminal never showed %q", s)
}

// ran is one Run in the background.
type ran struct {
	done chan struct{}
	code int
	err  error
}

func runBG(cmd *exec.Cmd, o Options) *ran {
	r := &ran{done: make(chan struct{})}
	go func() {
		r.code, r.err = Run(cmd, o)
		close(r.done)
	}()
	return r
}

// ended waits up to d for the Run to return.
func (r *ran) ended(d time.Duration) bool {
	select {
	case <-r.done:
		return true
	case <-time.After(d):
		return false
	}
}

// hungUp checks that the Run returned within d as a hang-up.
func (r *ran) hungUp(t *testing.T, d time.Duration) {
	t.Helper()
	if !r.ended(d) {
		t.Fatalf("Run did not return within %v of the hang-up", d)
	}
	if !errors.Is(r.err, ErrHungUp) || r.code != 128+int(syscall.SIGHUP) {
		t.Fatalf("Run: code %d err %v, want %d and ErrHungUp", r.code, r.err, 128+int(syscall.SIGHUP))
	}
}

// control checks that the Run did not return on its own: the hang-up is
// what ends it.
func (r *ran) control(t *testing.T) {
	t.Helper()
	if r.ended(500 * time.Millisecond) {
		t.Fatalf("Run returned before the hang-up: code %d err %v", r.code, r.err)
	}
}

// signals records what Options.Hangup delivered; on SIGKILL it kills the
// command's process group, as the holder's SIGKILL takes the session's
// PID namespace with it.
type signals struct {
	mu  sync.Mutex
	got []syscall.Signal
	cmd *exec.Cmd
}

func (s *signals) deliver(sig syscall.Signal) {
	s.mu.Lock()
	s.got = append(s.got, sig)
	s.mu.Unlock()
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	} else {
		_ = s.cmd.Process.Signal(sig)
	}
}

func (s *signals) list() []syscall.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]syscall.Signal(nil), s.got...)
}

var jobRE = regexp.MustCompile(`job=([0-9]+)`)

// gone reports whether pid has ended (gone or a zombie).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := len(b) - 1
	for i > 0 && b[i] != ')' {
		i--
	}
	return i+2 < len(b) && b[i+2] == 'Z'
}

// TestHangupClosedTerminal: issue 40 item 1. The user's terminal (a real
// PTY) goes away (its master closed: reads fail, no signal to this
// process) in each state of the session; Run returns 128+SIGHUP with
// ErrHungUp within a bound, the session got SIGHUP, and nothing of it is
// left running. Each case first checks that, left alone, the Run goes on.
func TestHangupClosedTerminal(t *testing.T) {
	bound := HangupWait + 2*time.Second
	t.Run("idle", func(t *testing.T) {
		tm := openTerm(t)
		cmd := exec.Command("sh", "-c", "echo ready; read line; echo read-returned; sleep 1000")
		r := runBG(cmd, Options{TTY: true, Stdin: tm.TTY, Stdout: tm.TTY, Stderr: tm.TTY})
		tm.WaitFor(t, "ready")
		r.control(t)
		tm.Ptmx.Close()
		r.hungUp(t, bound)
	})
	t.Run("foreground job", func(t *testing.T) {
		tm := openTerm(t)
		cmd := exec.Command("sh", "-c", `sleep 1000 & echo "job=$!"; wait $!`)
		r := runBG(cmd, Options{TTY: true, Stdin: tm.TTY, Stdout: tm.TTY, Stderr: tm.TTY})
		tm.WaitFor(t, "job=")
		tm.WaitFor(t, "\n")
		job, _ := strconv.Atoi(jobRE.FindStringSubmatch(tm.Output())[1])
		r.control(t)
		start := time.Now()
		tm.Ptmx.Close()
		r.hungUp(t, bound)
		// Ended by the hang-up (SIGHUP), well before the kill.
		if d := time.Since(start); d > HangupWait {
			t.Errorf("took %v: the job did not end on SIGHUP", d)
		}
		for i := 0; !gone(job); i++ {
			if i == 100 {
				t.Fatalf("the job (pid %d) still runs", job)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("child holding the PTY", func(t *testing.T) {
		tm := openTerm(t)
		// Neither the command nor its child ends on SIGHUP, and the child
		// keeps the PTY open.
		cmd := exec.Command("sh", "-c", `trap "" HUP; (exec sleep 1000) & echo ready; wait`)
		sig := &signals{cmd: cmd}
		r := runBG(cmd, Options{TTY: true, Stdin: tm.TTY, Stdout: tm.TTY, Stderr: tm.TTY, Hangup: sig.deliver})
		tm.WaitFor(t, "ready")
		r.control(t)
		tm.Ptmx.Close()
		r.hungUp(t, 2*HangupWait+2*time.Second)
		if got := sig.list(); len(got) != 2 || got[0] != syscall.SIGHUP || got[1] != syscall.SIGKILL {
			t.Fatalf("the session got %v, want SIGHUP then SIGKILL", got)
		}
	})
	t.Run("prompt on screen", func(t *testing.T) {
		tm := openTerm(t)
		g := NewGate()
		cmd := exec.Command("sh", "-c", "echo ready; sleep 1000")
		r := runBG(cmd, Options{TTY: true, Stdin: tm.TTY, Stdout: tm.TTY, Stderr: tm.TTY, Gate: g})
		tm.WaitFor(t, "ready")
		taker := g.Pause(nil) // the escalation prompt has the terminal
		read := make(chan error, 1)
		go func() {
			_, err := io.ReadAll(taker)
			read <- err
		}()
		r.control(t)
		tm.Ptmx.Close()
		r.hungUp(t, bound)
		select {
		case err := <-read:
			if err != nil {
				t.Fatalf("the prompt's input ended with %v, want EOF", err)
			}
		case <-time.After(time.Second):
			t.Fatal("the prompt's input did not end")
		}
		// A prompt that comes later finds no terminal either.
		if b, err := io.ReadAll(g.Pause(nil)); len(b) != 0 || err != nil {
			t.Fatalf("a later prompt read %q, %v", b, err)
		}
	})
	t.Run("output fails", func(t *testing.T) {
		// Input from a pipe that stays open: only the writes to the
		// terminal fail.
		tm := openTerm(t)
		in, keep, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		defer keep.Close()
		cmd := exec.Command("sh", "-c", "while :; do echo tick; sleep 0.1; done")
		r := runBG(cmd, Options{TTY: true, Stdin: in, Stdout: tm.TTY, Stderr: tm.TTY})
		tm.WaitFor(t, "tick")
		r.control(t)
		tm.Ptmx.Close()
		r.hungUp(t, bound)
	})
}

// TestHangupSIGHUP: SIGHUP to lazaret (the kernel's, for the process a
// terminal emulator started, or relayed by the user's shell) ends the
// session the same way, with the terminal still there, rather than
// passing it on to the sandbox's foreground job alone (which left the
// shell, and lazaret, running).
func TestHangupSIGHUP(t *testing.T) {
	tm := openTerm(t)
	cmd := exec.Command("sh", "-c", `sleep 1000 & echo "job=$!"; wait $!`)
	sig := &signals{cmd: cmd}
	r := runBG(cmd, Options{TTY: true, Stdin: tm.TTY, Stdout: tm.TTY, Stderr: tm.TTY, Hangup: sig.deliver})
	tm.WaitFor(t, "job=")
	r.control(t)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r.hungUp(t, HangupWait+2*time.Second)
	if got := sig.list(); len(got) == 0 || got[0] != syscall.SIGHUP {
		t.Fatalf("the session got %v, want SIGHUP first", got)
	}
}

// TestTTYPipeEOFIsNoHangup: in TTY mode with stdin a pipe, its end is the
// command's EOF (Ctrl-D through the line discipline), not a hang-up.
func TestTTYPipeEOFIsNoHangup(t *testing.T) {
	in, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	_, _ = w.WriteString("x\n")
	w.Close()
	null := devNull(t)
	code, err := Run(exec.Command("sh", "-c", "cat >/dev/null; exit 5"), Options{TTY: true, Stdin: in, Stdout: null, Stderr: null})
	if err != nil || code != 5 {
		t.Fatalf("code %d err %v, want 5", code, err)
	}
}
