//go:build integration

package integration

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// hangupBound is how long a `lazaret shell` may take to end once its
// terminal went away: the hang-up's grace (attach.HangupWait), the kill,
// the last ref sync (bounded at 10 s, quick here) and the exit.
const hangupBound = 30 * time.Second

// hangupShell starts `lazaret shell` on a PTY whose master the test
// holds, like a terminal emulator, with [session] on_close = "end" added
// to the configuration: these tests are about a session whose terminal
// goes away ending (the default keeps it, detached: detach_test.go). With
// ctty the PTY is lazaret's controlling terminal, so closing the master
// sends it SIGHUP (what the kernel does for the process a terminal
// emulator started, and what a shell relays to its jobs); without,
// closing it only makes lazaret's reads and writes of the terminal fail,
// with no signal at all.
func hangupShell(t *testing.T, e *Env, ctty bool) *ptySession {
	t.Helper()
	f, err := os.OpenFile(e.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("\n[session]\non_close = \"end\"\n")
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	s := ptyLazaret(t, e, ctty, "shell")
	// The shell answers: it reads its terminal.
	s.send("echo rea''dy\r")
	s.waitFor("ready")
	return s
}

// ptyLazaret runs lazaret with args on a PTY whose master the test holds
// (see hangupShell) and can really close.
func ptyLazaret(t *testing.T, e *Env, ctty bool, args ...string) *ptySession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	s := &ptySession{t: t, cmd: e.Cmd(ctx, args...), done: make(chan struct{})}
	attrs := &syscall.SysProcAttr{Setsid: true, Setctty: ctty}
	blocking, err := pty.StartWithAttrs(s.cmd, &pty.Winsize{Rows: 40, Cols: 150}, attrs)
	if err != nil {
		t.Fatal(err)
	}
	// pty's master is a blocking file: closed while the reader below
	// waits on it, it would stay open until lazaret wrote something (a
	// silent session: never), so the hang-up would never happen. The
	// same descriptor in Go's poller is really closed by Close.
	fd, err := unix.FcntlInt(blocking.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	blocking.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	s.follow(os.NewFile(uintptr(fd), "ptmx"))
	return s
}

// sandboxGone reports whether no container of e's data root is left.
func sandboxGone(t *testing.T, e *Env) bool {
	out, err := Podman(t, "ps", "-a", "--filter", "label=lazaret.data_root="+e.DataRoot, "--format", "{{.Names}}")
	return err == nil && strings.TrimSpace(out) == ""
}

// processTree is ps's view of pid and its descendants (a failure's
// evidence: what lives on after the hang-up).
func processTree(pid int) string {
	out, _ := exec.Command("ps", "-o", "pid,ppid,pgid,sid,stat,tty,args", "-p", strconv.Itoa(pid), "--ppid", strconv.Itoa(pid)).CombinedOutput()
	return string(out)
}

// hangup closes the session's terminal (the control: until then the
// session is there and lazaret runs, well past the bound) and checks that
// lazaret exits 129 within hangupBound, its session is gone from
// `lazaret status` and the sandbox stopped (it was the only session).
func hangup(t *testing.T, e *Env, s *ptySession) {
	t.Helper()
	// Control: left alone, the session stays (the checks below can fail).
	time.Sleep(3 * time.Second)
	select {
	case <-s.done:
		t.Fatalf("lazaret ended before the hang-up (exit %d); output:\n%s", s.code, s.output())
	default:
	}
	if n := sessions(t, e); n != 1 {
		t.Fatalf("before the hang-up: %d sessions, want 1", n)
	}
	if sandboxGone(t, e) {
		t.Fatal("before the hang-up: no container of the test's data root (the check below would pass vacuously)")
	}
	start := time.Now()
	pid := s.cmd.Process.Pid
	s.ptmx.Close()
	select {
	case <-s.done:
		t.Logf("lazaret exited %d after %v", s.code, time.Since(start).Round(time.Millisecond))
	case <-time.After(hangupBound):
		t.Fatalf("lazaret still runs %v after its terminal closed:\n%s", hangupBound, processTree(pid))
	}
	if s.code != 128+int(syscall.SIGHUP) {
		t.Errorf("lazaret exited %d, want %d (128+SIGHUP)", s.code, 128+int(syscall.SIGHUP))
	}
	Eventually(t, time.Minute, "the session to leave `lazaret status`", func() bool { return sessions(t, e) <= 0 })
	Eventually(t, time.Minute, "the sandbox to stop", func() bool { return sandboxGone(t, e) })
}

// TestHangupForegroundJob: issue 40 item 1. A shell running `sleep 1000`
// whose terminal goes away ends: lazaret exits 129, the session leaves
// `lazaret status` and the sandbox stops (it was the last session). On
// the code before, lazaret lived on, listed as attached, and the sandbox
// with it.
func TestHangupForegroundJob(t *testing.T) {
	for _, c := range []struct {
		name string
		ctty bool
		job  string
	}{
		// SIGHUP to lazaret, as from a terminal emulator going away.
		{"sighup", true, "echo job''start; sleep 1000"},
		// No signal: only the terminal's reads and writes fail.
		{"eio", false, "echo job''start; sleep 1000"},
		// A job that ignores SIGHUP: killed after the grace.
		{"job ignores sighup", true, `sh -c "trap '' HUP; echo job''start; exec sleep 1000"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := NewEnv(t)
			s := hangupShell(t, e, c.ctty)
			s.send(c.job + "\r")
			s.waitFor("jobstart")
			hangup(t, e, s)
		})
	}
}

// TestHangupIdleShell: an idle shell whose terminal goes away ends the
// same way (it did before too, through SIGHUP reaching the shell).
func TestHangupIdleShell(t *testing.T) {
	for _, ctty := range []bool{true, false} {
		name := "sighup"
		if !ctty {
			name = "eio"
		}
		t.Run(name, func(t *testing.T) {
			e := NewEnv(t)
			s := hangupShell(t, e, ctty)
			hangup(t, e, s)
		})
	}
}
