package proposal

import (
	"context"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi/netdtest"
)

// TestPendingInTheHub: a pending proposal is one of the sandbox's pending
// requests (kind proposal, the candidate's hash); `lazaret approvals
// answer` (answer_from = "any") decides it like `lazaret proposals`, and
// the proposal then leaves the hub. A stale hash through the hub is
// refused there too.
func TestPendingInTheHub(t *testing.T) {
	cfg, err := config.Parse("t.toml", []byte("[profiles.dev]\nimage = \"x\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	hub := approvals.New(nil, config.AnswerFromAny)
	_, netd := netdtest.Serve(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := New(ctx, Options{Config: cfg, Profile: cfg.Profiles["dev"], Registry: Hub(hub), Netd: netd, Rules: &eschost.Policy{}})
	rep := m.Propose(ctx, eschost.Proposal{Kind: "net", Target: "example.org", Session: &eschost.Session{ID: "s1"}})
	l := hub.List()
	if len(l) != 1 || l[0].ID != rep.ID || l[0].Kind != ctl.RequestProposal || l[0].Session != "s1" {
		t.Fatalf("hub: %+v", l)
	}
	p, _ := m.Get(rep.ID)
	if l[0].Hash != p.Hash {
		t.Fatalf("hub hash %q, proposal %q", l[0].Hash, p.Hash)
	}
	if _, err := hub.Answer(ctl.ApprovalAnswer{ID: rep.ID, Hash: "x", Action: ctl.ActionApprove}, "cli"); err == nil {
		t.Fatal("a stale hash through the hub was accepted")
	}
	if _, err := hub.Answer(ctl.ApprovalAnswer{ID: rep.ID, Hash: p.Hash, Action: ctl.ActionApprove}, approvals.CLIFrom(1, 2)); err != nil {
		t.Fatal(err)
	}
	w, err := m.Wait(ctx, rep.ID)
	if err != nil || w.Status != eschost.ProposalApproved || len(hub.List()) != 0 {
		t.Fatalf("%+v %v %+v", w, err, hub.List())
	}
	if got, _ := m.Get(rep.ID); got.From != approvals.CLIFrom(1, 2) {
		t.Fatalf("from %q", got.From)
	}
}
