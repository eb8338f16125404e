package approvals

import (
	"errors"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

func add(h *Hub) *Pending {
	return h.Add(ctl.PendingRequest{Kind: ctl.RequestEscalation, Session: "s1", Detail: "argv[0] \"touch\"", Summary: `"touch"`, Hash: "abc"})
}

func TestFirstAnswerWinsThroughTheHub(t *testing.T) {
	ev := events.New("dev", "/w")
	h := New(ev, config.AnswerFromAny)
	p := add(h)
	if len(p.ID) != 8 {
		t.Fatalf("id %q", p.ID)
	}
	d, err := h.Answer(ctl.ApprovalAnswer{ID: p.ID, Hash: "abc", Action: ctl.ActionApprove}, CLIFrom(42, 1000))
	if err != nil || d.Action != ctl.ActionApprove || !d.Remote {
		t.Fatalf("answer: %+v %v", d, err)
	}
	<-p.Done()
	// The terminal's answer comes second: it loses.
	if h.Decide(p, Decision{Action: ctl.ActionDeny, From: "terminal of session s1"}) {
		t.Fatal("the terminal's later answer replaced the first")
	}
	if got := p.Decision(); got.From != "lazaret approvals (pid 42, uid 1000)" {
		t.Fatalf("decision from %q", got.From)
	}
	ch, stop := ev.Subscribe(0)
	defer stop()
	if e := <-ch; e.Kind != ctl.EventApprovalPending || e.Request != p.ID || e.Detail != `"touch"` {
		t.Fatalf("first event %+v", e)
	}
	if e := <-ch; e.Kind != ctl.EventApprovalDecided || e.Decision != ctl.ActionApprove || e.Seq != 2 {
		t.Fatalf("second event %+v", e)
	}
}

func TestFirstAnswerWinsOnTheTerminal(t *testing.T) {
	h := New(nil, config.AnswerFromAny)
	p := add(h)
	if !h.Decide(p, Decision{Action: ctl.ActionDeny, From: "terminal of session s1"}) {
		t.Fatal("the terminal's first answer lost")
	}
	_, err := h.Answer(ctl.ApprovalAnswer{ID: p.ID, Hash: "abc", Action: ctl.ActionApprove}, CLIFrom(1, 1))
	if !errors.Is(err, ctl.ErrAnsweredFirst) {
		t.Fatalf("late answer: %v", err)
	}
	if len(h.List()) != 0 {
		t.Fatal("a decided request is still listed")
	}
}

func TestStaleHashRefused(t *testing.T) {
	h := New(nil, config.AnswerFromAny)
	p := add(h)
	_, err := h.Answer(ctl.ApprovalAnswer{ID: p.ID, Hash: "other", Action: ctl.ActionApprove}, CLIFrom(1, 1))
	if !errors.Is(err, ctl.ErrStaleRequest) {
		t.Fatalf("stale hash: %v", err)
	}
	select {
	case <-p.Done():
		t.Fatal("a stale answer decided the request")
	default:
	}
	if _, err := h.Answer(ctl.ApprovalAnswer{ID: p.ID, Hash: "other", Action: ctl.ActionDeny}, CLIFrom(1, 1)); !errors.Is(err, ctl.ErrStaleRequest) {
		t.Fatalf("a denial naming a stale hash: %v", err)
	}
	// Control: the right hash is accepted.
	if _, err := h.Answer(ctl.ApprovalAnswer{ID: p.ID, Hash: "abc", Action: ctl.ActionApprove}, CLIFrom(1, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestAnswerFromSessionRefused(t *testing.T) {
	h := New(nil, config.AnswerFromSession)
	p := add(h)
	_, err := h.Answer(ctl.ApprovalAnswer{ID: p.ID, Hash: "abc", Action: ctl.ActionDeny}, CLIFrom(1, 1))
	if !errors.Is(err, ctl.ErrAnswerNotAllowed) {
		t.Fatalf("answer_from=session: %v", err)
	}
	select {
	case <-p.Done():
		t.Fatal("a refused answer decided the request")
	default:
	}
	// Control: the same answer with answer_from = "any".
	h2 := New(nil, config.AnswerFromAny)
	p2 := add(h2)
	if _, err := h2.Answer(ctl.ApprovalAnswer{ID: p2.ID, Hash: "abc", Action: ctl.ActionDeny}, CLIFrom(1, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownAndBadAction(t *testing.T) {
	h := New(nil, config.AnswerFromAny)
	if _, err := h.Get("deadbeef"); !errors.Is(err, ctl.ErrUnknownRequest) {
		t.Fatalf("unknown: %v", err)
	}
	p := add(h)
	if _, err := h.Answer(ctl.ApprovalAnswer{ID: p.ID, Hash: "abc", Action: "edit"}, ""); !errors.Is(err, ctl.ErrBadRequest) {
		t.Fatalf("bad action: %v", err)
	}
}
