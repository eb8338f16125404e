//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
)

// keptState is the STATE column of the kept session `lazaret ps` lists
// for e's workspace ("" when none).
func keptState(t *testing.T, e *Env) string {
	out := e.MustRun("ps")
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && strings.HasSuffix(l, e.Workspace) && (f[2] == "attached" || f[2] == "detached") {
			return f[2]
		}
	}
	return ""
}

// TestDetachAttach: a shell on a terminal detaches with the keys (lazaret
// exits 0 and says how to come back), stays listed as detached, and
// `lazaret attach` in another terminal shows its screen and answers;
// closing that terminal detaches it again (on_close's default), and a
// third terminal ends it with its exit code. The control of the closed
// terminal, on_close = "end", is hangup_test.go's: the same close ends
// the session there.
func TestDetachAttach(t *testing.T) {
	e := NewEnv(t)
	s := ptyLazaret(t, e, true, "shell")
	s.waitFor("detaches this session")
	s.send("echo MARK$((6*7))\r")
	s.waitFor("MARK42")
	s.send("\x1cd")
	if code := s.exit(); code != 0 {
		t.Fatalf("detach: lazaret exited %d:\n%s", code, s.output())
	}
	if !strings.Contains(s.output(), "detached; `lazaret attach") {
		t.Errorf("no word on how to attach again:\n%s", s.output())
	}
	Eventually(t, 30*time.Second, "ps to list the session detached", func() bool { return keptState(t, e) == "detached" })

	a := ptyLazaret(t, e, true, "attach")
	a.waitFor("MARK42") // the screen, redrawn
	a.send("echo again$((1+1))\r")
	a.waitFor("again2")
	a.ptmx.Close()
	<-a.done
	Eventually(t, 30*time.Second, "the closed terminal to leave the session detached", func() bool { return keptState(t, e) == "detached" })

	b := ptyLazaret(t, e, true, "attach")
	b.waitFor("again2")
	b.send("exit 3\r")
	if code := b.exit(); code != 3 {
		t.Fatalf("the attached session's exit: lazaret exited %d, want 3:\n%s", code, b.output())
	}
	Eventually(t, time.Minute, "the sandbox to stop", func() bool { return sandboxGone(t, e) })
	if st := keptState(t, e); st != "" {
		t.Fatalf("ps still lists the ended session as %s", st)
	}
}

// TestShellDetachFlag: `lazaret shell --detach` (no terminal needed)
// prints the session's id once it runs; attach by that id takes it.
func TestShellDetachFlag(t *testing.T) {
	e := NewEnv(t)
	r := e.Run("shell", "--detach")
	id := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || len(id) != 12 || !strings.Contains(r.Stderr, "lazaret attach "+id) {
		t.Fatalf("shell --detach: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if st := keptState(t, e); st != "detached" {
		t.Fatalf("ps lists the session as %q", st)
	}
	a := ptyLazaret(t, e, true, "attach", id)
	a.send("echo hi$((2+3))\r")
	a.waitFor("hi5")
	a.send("exit\r")
	if code := a.exit(); code != 0 {
		t.Fatalf("lazaret exited %d:\n%s", code, a.output())
	}
}

// TestShellDetachAsksFirst: a detached shell in a directory that is not a
// git repository asks its direct-mode question on the terminal that
// started it, before the keeper is spawned (nobody is at the keeper's
// terminal: before, the start waited there for ever). Without a terminal
// it is the one-line error and nothing is left; a y on the terminal
// starts it detached.
func TestShellDetachAsksFirst(t *testing.T) {
	e := NewEnv(t)
	e.NoDirect = true
	r := e.Run("shell", "--detach")
	if r.Code != 2 || !strings.Contains(r.Stderr, "pass --direct") || r.Stdout != "" {
		t.Fatalf("without a terminal: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if st := keptState(t, e); st != "" || !sandboxGone(t, e) {
		t.Fatalf("a refused start left a session (%q) or a sandbox", st)
	}
	s := ptyLazaret(t, e, true, "shell", "--detach")
	s.waitFor("Continue? [y/N]")
	time.Sleep(prompt.MinReadable + 500*time.Millisecond) // past the readability gate
	s.send("y\r")
	if code := s.exit(); code != 0 || !strings.Contains(s.output(), "runs detached") {
		t.Fatalf("after y: exit %d:\n%s", code, s.output())
	}
	if st := keptState(t, e); st != "detached" {
		t.Fatalf("ps lists the session as %q", st)
	}
	a := ptyLazaret(t, e, true, "attach")
	a.send("exit 4\r")
	if code := a.exit(); code != 4 {
		t.Fatalf("attach: exit %d:\n%s", code, a.output())
	}
}
