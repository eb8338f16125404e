//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// shellReady waits until the shell of s answers a command.
func (s *ptySession) shellReady(tag string) {
	s.t.Helper()
	s.send("echo " + tag + "$((6*7))\r")
	s.waitShown(tag + "42")
}

// keysAfterWithdrawal types a command line at s the moment its terminal
// says the prompt was withdrawn, then, past the guard's window, a control
// command: the control reaches the shell, the first never does.
func keysAfterWithdrawal(t *testing.T, s *ptySession, tag string) {
	t.Helper()
	s.send("echo LEAK" + tag + "$((6*7))\r")
	time.Sleep(prompt.MinReadable + 500*time.Millisecond)
	// Control: the same keys typed now reach the shell.
	s.send("\recho CTRL" + tag + "$((6*7))\r")
	s.waitShown("CTRL" + tag + "42")
	if strings.Contains(s.output(), "LEAK"+tag+"42") {
		t.Fatalf("keys typed at the withdrawn prompt reached the shell:\n%s", s.output())
	}
}

// TestPromptWithdrawn is issue 40 item 4 on the real path, two shells on
// one sandbox. (1) A's agent asks for a host command and gives up
// (--timeout): the prompt on A leaves the screen at once, says "prompt
// withdrawn: the request ended (its client went away)", and a command
// line typed at A right then never reaches A's shell (the withdrawal
// guard), while the same keys typed a moment later do (the control: the
// guard, not a broken terminal, held them). The audit records the
// withdrawal and the terminal, not a "context canceled". (2) B's DNS
// lookup of a denied name prompts on A, the oldest terminal; the prompt
// names "a lookup from this sandbox", B is told where it went, and when
// the lookup stops waiting the prompt is withdrawn (expired) on A, B is
// told, A's keys are dropped again, and the audit says it was shown and
// withdrawn, not "not asked (no terminal)".
func TestPromptWithdrawn(t *testing.T) {
	env := NewEnv(t)
	a := startPTY(t, env, "shell")
	a.shellReady("READYA")
	b := startPTY(t, env, "shell")
	b.shellReady("READYB")

	// (1) An escalation request whose client goes away.
	a.send(`lazaret-escalate --timeout 3s --reason "withdraw me" -- touch withdrawn-file; echo "rc=$?"` + "\r")
	a.waitShown("abort lazaret")
	a.waitShown(escprompt.WithdrawnLine(escprompt.WithdrawClientGone))
	keysAfterWithdrawal(t, a, "E")
	a.waitShown("rc=124")
	trail := env.MustRun("audit")
	if !strings.Contains(trail, escprompt.WithdrawnLine(escprompt.WithdrawClientGone)) || !strings.Contains(trail, "asked_on") {
		t.Errorf("audit does not record the withdrawal and where the prompt was:\n%s", trail)
	}

	// (2) B's DNS lookup, asked on A, expires.
	Eventually(t, time.Minute, "netd to hold denied names", func() bool { return netStatus(t, env).Hold > 0 })
	b.send("getent hosts withdraw.test; echo \"RC1=$?\"\r")
	a.waitShown("[O] allow once")
	if !strings.Contains(a.output(), "a lookup from this sandbox") {
		t.Errorf("the DNS prompt does not say who asked:\n%s", a.output())
	}
	b.waitShown("is awaiting approval on the terminal of session")
	start := time.Now()
	a.waitShown(escprompt.WithdrawnLine(escprompt.WithdrawExpired))
	t.Logf("DNS prompt withdrawn %v after it was shown", time.Since(start).Round(time.Second))
	keysAfterWithdrawal(t, a, "N")
	b.waitShown("was withdrawn: the request ended (expired)")
	audit := env.MustRun("audit", "--json")
	if !strings.Contains(audit, `withdrawn: the request ended (expired)`) || !strings.Contains(audit, `"shown_on"`) ||
		strings.Contains(audit, "not asked (no terminal)") {
		t.Errorf("audit does not record the shown and withdrawn DNS prompt:\n%s", audit)
	}
	b.send("exit\r")
	a.send("exit\r")
	if code := b.exit(); code != 0 {
		t.Errorf("B exit %d", code)
	}
	if code := a.exit(); code != 0 {
		t.Errorf("A exit %d", code)
	}
}

// TestHangupPromptTerminalClosed: a terminal that goes away with an
// escalation prompt on it denies the request at once, and the audit says
// why: "terminal closed" (before, the request waited until its client
// died with the session and was audited "context canceled").
func TestHangupPromptTerminalClosed(t *testing.T) {
	e := NewEnv(t)
	s := hangupShell(t, e, true)
	s.send(`lazaret-escalate --reason "hang me" -- touch hung-file; echo "rc=$?"` + "\r")
	s.waitFor("abort lazaret")
	hangup(t, e, s)
	trail := e.MustRun("audit")
	if !strings.Contains(trail, escprompt.WithdrawHungUp) || strings.Contains(trail, "context canceled") {
		t.Errorf("audit does not say the terminal closed:\n%s", trail)
	}
}
