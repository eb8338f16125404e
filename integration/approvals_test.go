//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// pendingOne waits until `lazaret approvals --json` lists exactly one
// request and returns it.
func pendingOne(t *testing.T, e *Env) ctl.PendingRequest {
	t.Helper()
	var list []ctl.PendingRequest
	Eventually(t, time.Minute, "one pending request", func() bool {
		list = nil
		return json.Unmarshal([]byte(e.MustRun("approvals", "--json")), &list) == nil && len(list) == 1
	})
	return list[0]
}

// TestApprovalsAnswerFromAnotherTerminal is issue 35's pending approvals
// on the real path: with answer_from = "any", an escalation asked on a
// terminal is listed by `lazaret approvals`, approved from another
// process bound to its hash, withdrawn from the terminal ("answered from
// another terminal"), runs on the host, and the audit says where the
// answer came from; `events --json` saw approval.pending and
// approval.decided in order and ends with the sandbox. Control: with
// answer_from = "session" the same answer is refused and the prompt
// stays on its terminal.
func TestApprovalsAnswerFromAnotherTerminal(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("[escalation]\nanswer_from = \"any\"\n")
	a := startPTY(t, e, "exec", "-t", "--", "sh")
	a.shellReady("READYA")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var events lockedBuffer
	ev := e.Cmd(ctx, "events", "--json")
	ev.Stdout, ev.Stderr = &events, &events
	if err := ev.Start(); err != nil {
		t.Fatal(err)
	}
	a.send(`lazaret-escalate --reason "approve me elsewhere" -- touch approved-file; echo "rc=$?"` + "\r")
	a.waitShown("abort lazaret")
	p := pendingOne(t, e)
	if p.Kind != ctl.RequestEscalation || !strings.Contains(p.Detail, `"approved-file"`) || len(p.Hash) != 64 {
		t.Fatalf("pending request %+v", p)
	}
	if r := e.Run("approvals", "answer", p.ID, "approve", "--hash", strings.Repeat("0", 64)); r.Code == 0 || !strings.Contains(r.Stderr, "request changed") {
		t.Fatalf("a stale hash was accepted: %+v", r)
	}
	e.MustRun("approvals", "answer", p.ID, "approve", "--hash", p.Hash)
	a.waitShown(escprompt.WithdrawnLine(escprompt.WithdrawAnsweredElsewhere))
	a.waitShown("rc=0")
	if _, err := os.Stat(filepath.Join(e.Workspace, "approved-file")); err != nil {
		t.Fatalf("the approved command did not run on the host: %v", err)
	}
	trail := e.MustRun("audit", "--json")
	if !strings.Contains(trail, `"answered_from":"lazaret approvals (pid `) || !strings.Contains(trail, `"answer_from":"any"`) {
		t.Errorf("audit does not record where the answer came from:\n%s", trail)
	}
	// Keys typed just after a withdrawal are dropped (they were meant for
	// the prompt): wait past that before the shell gets its exit.
	time.Sleep(prompt.MinReadable + 500*time.Millisecond)
	a.send("exit\r")
	if code := a.exit(); code != 0 {
		t.Errorf("exit %d", code)
	}
	if err := ev.Wait(); err != nil {
		t.Errorf("events did not end cleanly with the sandbox: %v\n%s", err, events.String())
	}
	checkEventOrder(t, events.String())

	// Control: answer_from = "session" refuses the same answer.
	e.WriteConfig("[escalation]\nanswer_from = \"session\"\n")
	b := startPTY(t, e, "exec", "-t", "--", "sh")
	b.shellReady("READYB")
	b.send(`lazaret-escalate --reason "only here" -- touch refused-file; echo "rc=$?"` + "\r")
	b.waitShown("abort lazaret")
	q := pendingOne(t, e)
	r := e.Run("approvals", "answer", q.ID, "approve", "--hash", q.Hash)
	if r.Code == 0 || !strings.Contains(r.Stderr, `answer_from = "any"`) {
		t.Fatalf("answer_from = session: the answer was not refused with its hint: %+v", r)
	}
	if again := pendingOne(t, e); again.ID != q.ID || strings.Contains(b.output(), escprompt.WithdrawAnsweredElsewhere) {
		t.Fatalf("the refused answer took the request: %+v\n%s", again, b.output())
	}
	time.Sleep(prompt.MinReadable + 500*time.Millisecond) // past the readability gate
	b.send("d")
	b.waitShown("rc=")
	// As above: keys right after the prompt left are dropped.
	time.Sleep(prompt.MinReadable + 500*time.Millisecond)
	b.send("exit\r")
	b.exit()
	if _, err := os.Stat(filepath.Join(e.Workspace, "refused-file")); err == nil {
		t.Fatal("the denied command ran")
	}
}

// checkEventOrder: the JSON lines hold approval.pending then
// approval.decided (approve), with increasing sequence numbers, and end
// with sandbox.stopped.
func checkEventOrder(t *testing.T, out string) {
	t.Helper()
	var last uint64
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev ctl.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not an event line %q: %v", line, err)
		}
		if ev.V != ctl.EventsVersion || ev.Seq <= last {
			t.Fatalf("event %+v after seq %d", ev, last)
		}
		last = ev.Seq
		kinds = append(kinds, ev.Kind)
		if ev.Kind == ctl.EventApprovalDecided && (ev.Decision != ctl.ActionApprove || !strings.HasPrefix(ev.From, "lazaret approvals")) {
			t.Errorf("decided event %+v", ev)
		}
	}
	joined := strings.Join(kinds, " ")
	if !strings.Contains(joined, ctl.EventApprovalPending+" "+ctl.EventApprovalDecided) || kinds[len(kinds)-1] != ctl.EventSandboxStopped {
		t.Fatalf("events %v", kinds)
	}
}
