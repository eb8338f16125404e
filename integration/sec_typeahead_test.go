//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
)

// waitReadable waits until a prompt the terminal just showed is readable:
// the readability gate drops every key typed before (prompt.MinReadable
// after its frame was written).
func waitReadable() { time.Sleep(prompt.MinReadable + 300*time.Millisecond) }

// answeredRE matches the scripts' "rc=N" / "RC1=N" lines (their command
// lines, shown by the prompt and the shell, say "rc=$?").
var answeredRE = regexp.MustCompile(`(?i)rc1?=[0-9]`)

// cadence is issue 33's typing: a key every 50-200 ms.
var cadence = []time.Duration{50, 200, 60, 90, 150, 120, 70, 180}

// waitShown polls the terminal every 5 ms (Eventually's 50 ms would eat
// into the type-ahead window) and returns when it shows what.
func (s *ptySession) waitShown(what string) time.Time {
	s.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(s.output(), what) {
		if time.Now().After(deadline) {
			s.t.Fatalf("terminal never showed %q:\n%s", what, s.output())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Now()
}

// typeAhead types text at the cadence from shown on, stopping 300 ms short
// of the gate's delay (so every key it sends is inside the gate); it
// returns what it sent.
func (s *ptySession) typeAhead(shown time.Time, text string) string {
	var sent strings.Builder
	for i, k := range text {
		time.Sleep(cadence[i%len(cadence)] * time.Millisecond)
		if time.Since(shown) > prompt.MinReadable-300*time.Millisecond {
			break
		}
		s.send(string(k))
		sent.WriteRune(k)
	}
	return sent.String()
}

// TestTypeAheadEscalation is issue 33 item 1 end to end: the agent's
// script asks to touch a file in the host workspace while the human
// keeps typing ("cat data; quit": an a, a d, a q among them) 50-200 ms a
// key from the moment the prompt is on the screen. Nothing answers: the
// file does not exist, the request is still waiting, and the prompt says
// the keys were ignored. Control: the same request answered with A once
// the prompt is readable runs the command on the host.
func TestTypeAheadEscalation(t *testing.T) {
	e := NewEnv(t)
	target := filepath.Join(e.Workspace, "typeahead-pwned")
	script := `lazaret-escalate --reason "routine" -- touch typeahead-pwned; echo "rc=$?"`
	s := startPTY(t, e, "exec", "-t", "--", "sh", "-c", script)
	shown := s.waitShown("abort lazaret")
	sent := s.typeAhead(shown, "cat data; quit")
	if !strings.ContainsAny(sent, "aA") {
		t.Fatalf("the type-ahead never sent an a: %q", sent)
	}
	time.Sleep(200 * time.Millisecond) // time for an approval to have run
	if _, err := os.Stat(target); err == nil {
		t.Fatalf("type-ahead %q approved: the host file exists", sent)
	}
	out := s.output()
	if answeredRE.MatchString(out) {
		t.Fatalf("type-ahead %q answered the prompt:\n%s", sent, out)
	}
	s.waitShown(prompt.IgnoredNotice[len(prompt.IgnoredNotice)-12:]) // "were ignored"
	t.Logf("type-ahead %q within %v of the prompt: ignored", sent, time.Since(shown).Round(time.Millisecond))

	// Control: once readable, A approves and the command runs on the host.
	waitReadable()
	s.send("a")
	s.waitShown("rc=0")
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("control: A after the delay did not run the command: %v\n%s", err, s.output())
	}
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// The audit trail has one decision: the human's approval.
	trail := e.MustRun("audit")
	if strings.Count(trail, "escalation.decision") != 1 || !strings.Contains(trail, "decision=approved") {
		t.Errorf("audit:\n%s", trail)
	}
}

// TestTypeAheadNetDenial: the network prompt under `lazaret shell`. The
// human's "exit" and the allow keys o and a, typed 50-200 ms apart from
// the moment the prompt is on the screen, answer nothing (the lookup is
// still waiting, nothing is allowed) and are not forwarded to the shell
// afterwards either (the shell is still there). Control: D once the
// prompt is readable denies the lookup.
func TestTypeAheadNetDenial(t *testing.T) {
	env := NewEnv(t)
	sh := startPTY(t, env, "shell")
	// Not just success: before the sandbox is up, net status answers
	// with the configured policy ("running": false).
	Eventually(t, 2*time.Minute, "net status to answer", func() bool { return netRunning(env) })
	Eventually(t, time.Minute, "netd to hold denied names", func() bool { return netStatus(t, env).Hold > 0 })
	sh.send("getent hosts typeahead.test; echo \"RC1=$?\"\r")
	shown := sh.waitShown("[O] allow once")
	sent := sh.typeAhead(shown, "exit\roaoa")
	if !strings.ContainsAny(sent, "ioa") {
		t.Fatalf("the type-ahead never sent an answer key: %q", sent)
	}
	time.Sleep(200 * time.Millisecond)
	out := sh.output()
	if answeredRE.MatchString(out) || strings.Contains(out, "allowed for this sandbox run") || strings.Contains(out, "no more notices") {
		t.Fatalf("type-ahead %q answered the network prompt:\n%s", sent, out)
	}
	sh.waitShown(prompt.IgnoredNotice)
	for _, d := range netStatus(t, env).Policy.AllowDomains {
		if d.Pattern == "typeahead.test" {
			t.Fatal("type-ahead allowed the name")
		}
	}

	waitReadable()
	sh.send("d")
	sh.waitShown("RC1=2")
	// The keys typed during the prompt never reach the shell: it did not
	// exit and answers.
	sh.send("echo \"ALIVE\"$((6*7))\r")
	sh.waitShown("ALIVE42")
	audit := env.MustRun("audit", "--json")
	if !strings.Contains(audit, `"name":"typeahead.test"`) || !strings.Contains(audit, `"decision":"denied"`) {
		t.Errorf("audit trail lacks the denial:\n%s", audit)
	}
	sh.send("exit\r")
	if code := sh.exit(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
