package proposal

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi/netdtest"
)

type rig struct {
	m     *Manager
	reg   *Local
	netd  *netdtest.Server
	rules *eschost.Policy
	mu    sync.Mutex
	trail []audit.Entry
}

func newRig(t *testing.T, mode string) *rig {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte("[profiles.dev]\nimage = \"x\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{reg: NewLocal(), rules: &eschost.Policy{}}
	var cl *netdapi.Client
	r.netd, cl = netdtest.Serve(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r.m = New(ctx, Options{Mode: mode, Config: cfg, Profile: cfg.Profiles["dev"], Registry: r.reg, Netd: cl, Rules: r.rules,
		Audit: func(_ context.Context, e audit.Entry) (uint64, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.trail = append(r.trail, e)
			return uint64(len(r.trail)), nil
		}})
	return r
}

func (r *rig) audited(change string) []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, e := range r.trail {
		if e.Kind == audit.KindPolicyChange && e.Fields["change"] == change {
			out = append(out, e.Fields)
		}
	}
	return out
}

// netdOps are the ops netd was asked, with their targets.
func (r *rig) netdOps(op string) []string {
	var out []string
	for _, q := range r.netd.Requests() {
		if q.Op == op {
			out = append(out, q.Target)
		}
	}
	return out
}

func net(target string) eschost.Proposal {
	return eschost.Proposal{Kind: "net", Target: target, Why: "docs\x1b[31m", Session: &eschost.Session{ID: "s1"}}
}

// TestRefusedInEveryMode: a refuse finding, bad input and mode off are
// refused at once; nothing is stored but the audit line. Positive
// control: a good name in the same rig is held.
func TestRefusedInEveryMode(t *testing.T) {
	for _, mode := range []string{config.ProposalsManual, config.ProposalsAuto} {
		r := newRig(t, mode)
		for _, bad := range []string{"*", "10.0.0.1", "169.254.169.254", "*.com", strings.Repeat("a", 10<<10), "a b"} {
			if got := r.m.Propose(context.Background(), net(bad)); got.Status != eschost.ProposalRefused || got.ID != "" {
				t.Errorf("%s: %q: %+v", mode, bad[:min(20, len(bad))], got)
			}
		}
		if len(r.m.List()) != 0 || len(r.reg.used) != 0 || len(r.netd.Requests()) > 8 {
			t.Fatalf("%s: refused proposals stored: %v", mode, r.m.List())
		}
		if n := len(r.audited("proposal")); n != 6 {
			t.Errorf("%s: %d audit lines, want 6", mode, n)
		}
		if got := r.m.Propose(context.Background(), net("8.8.8.8")); got.Status != eschost.ProposalPending {
			t.Errorf("%s: control: %+v", mode, got)
		}
	}
	r := newRig(t, config.ProposalsOff)
	if got := r.m.Propose(context.Background(), net("example.org")); got.Status != eschost.ProposalRefused || !strings.Contains(got.Message, "off") {
		t.Fatalf("off: %+v", got)
	}
	if len(r.m.List()) != 0 || len(r.audited("proposal")) != 1 {
		t.Fatal("off: stored")
	}
}

// TestManualApprove: a pending proposal is listed; an approval with another hash is refused as stale, with the
// candidate's hash it applies the rule through netd's decide (which
// releases a held lookup), and --wait says approved. The audit trail has
// the proposal and the decision with the policy's hash.
func TestManualApprove(t *testing.T) {
	r := newRig(t, config.ProposalsManual)
	rep := r.m.Propose(context.Background(), net("example.org:443"))
	if rep.Status != eschost.ProposalPending || rep.ID == "" {
		t.Fatalf("%+v", rep)
	}
	if l := r.m.List(); len(l) != 1 || l[0].Status != ctl.ProposalPending || l[0].ID != rep.ID {
		t.Fatalf("list: %+v", l)
	}
	p, _ := r.m.Get(rep.ID)
	if p.Rule != "example.org" || p.Port != 443 || p.Key != config.KeyAllowDomains || strings.Contains(p.Why, "\x1b") {
		t.Fatalf("proposal: %+v", p)
	}
	_, err := r.m.Answer(ctl.ProposalAnswer{ID: rep.ID, Hash: strings.Repeat("0", 64), Action: ctl.ActionApprove}, "cli")
	var ce *ctl.Error
	if !errors.As(err, &ce) || ce.Code != ctl.ErrStaleRequest.Code {
		t.Fatalf("stale hash: %v", err)
	}
	if len(r.netdOps(netdapi.OpDecide)) != 0 {
		t.Fatal("a stale approval reached netd")
	}
	got, err := r.m.Answer(ctl.ProposalAnswer{ID: rep.ID, Hash: p.Hash, Action: ctl.ActionApprove, Reason: "ok"}, "cli")
	if err != nil || got.Status != ctl.ProposalApproved || got.PolicyHash == "" {
		t.Fatalf("approve: %+v %v", got, err)
	}
	if ops := r.netdOps(netdapi.OpDecide); !slices.Equal(ops, []string{"example.org"}) {
		t.Fatalf("netd decide: %q", ops)
	}
	if w, err := r.m.Wait(context.Background(), rep.ID); err != nil || w.Status != eschost.ProposalApproved {
		t.Fatalf("wait: %+v %v", w, err)
	}
	d := r.audited("proposal decision")
	if len(d) != 1 || d[0]["decision"] != "approved" || d[0]["from"] != "cli" || d[0]["reason"] != "ok" || len(d[0]["policy_hash"]) != 64 {
		t.Fatalf("audit: %v", d)
	}
	if a := r.audited("proposal"); len(a) != 1 || a[0]["checker_version"] != "1" || a[0]["hash"] != p.Hash {
		t.Fatalf("audit: %v", a)
	}
	if _, err := r.m.Answer(ctl.ProposalAnswer{ID: rep.ID, Hash: p.Hash, Action: ctl.ActionDeny}, "cli"); !errors.As(err, &ce) || ce.Code != ctl.ErrAnsweredFirst.Code {
		t.Fatalf("second answer: %v", err)
	}
}

// TestDenyLeavesPolicy: a denial asks netd for nothing and --wait says
// denied with the reason.
func TestDenyLeavesPolicy(t *testing.T) {
	r := newRig(t, config.ProposalsManual)
	rep := r.m.Propose(context.Background(), net("example.org"))
	got, err := r.m.Answer(ctl.ProposalAnswer{ID: rep.ID, Action: ctl.ActionDeny, Reason: "not now"}, "cli")
	if err != nil || got.Status != ctl.ProposalDenied {
		t.Fatalf("%+v %v", got, err)
	}
	if len(r.netdOps(netdapi.OpDecide))+len(r.netdOps(netdapi.OpAllow)) != 0 {
		t.Fatal("a denial changed netd's policy")
	}
	if w, _ := r.m.Wait(context.Background(), rep.ID); w.Status != eschost.ProposalDenied || !strings.Contains(w.Message, "not now") {
		t.Fatalf("wait: %+v", w)
	}
}

// TestAutoOnlyClean: auto applies a candidate with nothing above info at
// once, audited as auto; an IP literal (a review finding) waits for the
// human (the control).
func TestAutoOnlyClean(t *testing.T) {
	r := newRig(t, config.ProposalsAuto)
	rep := r.m.Propose(context.Background(), net("example.org"))
	if rep.Status != eschost.ProposalApproved || len(r.netdOps(netdapi.OpDecide)) != 1 {
		t.Fatalf("clean: %+v", rep)
	}
	if a := r.audited("proposal"); len(a) != 1 || a[0]["outcome"] != "auto" {
		t.Fatalf("audit: %v", a)
	}
	if d := r.audited("proposal decision"); len(d) != 1 || !strings.HasPrefix(d[0]["from"], "auto") {
		t.Fatalf("audit: %v", d)
	}
	rev := r.m.Propose(context.Background(), net("8.8.8.8"))
	if rev.Status != eschost.ProposalPending || len(r.netdOps(netdapi.OpAllow)) != 0 {
		t.Fatalf("review finding auto-approved: %+v", rev)
	}
	ex := r.m.Propose(context.Background(), eschost.Proposal{Kind: "exec", Argv: []string{"make", "lint"}})
	if ex.Status != eschost.ProposalPending || len(r.rules.Rules()) != 0 {
		t.Fatalf("make (reads agent files) auto-approved: %+v", ex)
	}
}

// TestExecApproveJoinsLivePolicy: an approved exec proposal is in the
// server's live auto_approve; an argument with a space is refused.
func TestExecApproveJoinsLivePolicy(t *testing.T) {
	r := newRig(t, config.ProposalsManual)
	rep := r.m.Propose(context.Background(), eschost.Proposal{Kind: "exec", Argv: []string{"go", "vet", "./..."}})
	p, err := r.m.Get(rep.ID)
	if err != nil || p.Key != config.KeyAutoApprove {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := r.m.Answer(ctl.ProposalAnswer{ID: rep.ID, Hash: p.Hash, Action: ctl.ActionApprove}, "cli"); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(r.rules.Rules(), func(a []string) bool { return slices.Equal(a, []string{"go", "vet", "./..."}) }) {
		t.Fatalf("rules: %q", r.rules.Rules())
	}
	if got := r.m.Propose(context.Background(), eschost.Proposal{Kind: "exec", Argv: []string{"echo", "a b"}}); got.Status != eschost.ProposalRefused {
		t.Fatalf("space: %+v", got)
	}
}

// TestChangedCandidateNotApplied: the live policy changed between the
// showing and the approval (the name is now allowed: another finding),
// so the approval is not applied.
func TestChangedCandidateNotApplied(t *testing.T) {
	r := newRig(t, config.ProposalsManual)
	rep := r.m.Propose(context.Background(), net("example.org"))
	p, _ := r.m.Get(rep.ID)
	r.netd.SetPolicy(netpolicy.Policy{AllowDomains: []netpolicy.Domain{{Pattern: "example.org"}}})
	got, err := r.m.Answer(ctl.ProposalAnswer{ID: rep.ID, Hash: p.Hash, Action: ctl.ActionApprove}, "cli")
	if err != nil || got.Status != ctl.ProposalDenied || !strings.Contains(got.Reason, "changed") {
		t.Fatalf("%+v %v", got, err)
	}
	if len(r.netdOps(netdapi.OpDecide)) != 0 {
		t.Fatal("applied")
	}
}

// shower answers the terminal prompt.
type shower struct {
	action escprompt.Action
	shown  chan escprompt.PromptRequest
}

func (s *shower) Prompt(context.Context, escprompt.PromptRequest) (escprompt.Answer, error) {
	return escprompt.Answer{Action: escprompt.Deny}, nil
}

func (s *shower) Show(_ context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	s.shown <- r
	return escprompt.Answer{Action: s.action}, nil
}

// TestTerminalDecides: the proposal is shown on its session's terminal
// with the candidate and every finding; the terminal's approval applies
// it and names the terminal.
func TestTerminalDecides(t *testing.T) {
	r := newRig(t, config.ProposalsManual)
	sh := &shower{action: escprompt.Approve, shown: make(chan escprompt.PromptRequest, 1)}
	p := net("8.8.8.8")
	p.Session.Prompt = sh
	rep := r.m.Propose(context.Background(), p)
	shown := <-sh.shown
	if !strings.Contains(shown.Command, "8.8.8.8/32") || !strings.Contains(shown.Reason, "ip-literal") || shown.PendingID != rep.ID {
		t.Fatalf("shown: %+v", shown)
	}
	w, err := r.m.Wait(context.Background(), rep.ID)
	if err != nil || w.Status != eschost.ProposalApproved {
		t.Fatalf("%+v %v", w, err)
	}
	if got, _ := r.m.Get(rep.ID); got.From != "terminal of session s1" || len(r.netdOps(netdapi.OpAllow)) != 1 {
		t.Fatalf("%+v %q", got, r.netdOps(netdapi.OpAllow))
	}
}

// TestNotTaken: without netd (lazaret-kube) a network proposal is refused
// with what the user can do instead, an exec one is taken; with
// RequireTerminal a session without a prompter is refused (nobody could
// decide), one with a prompter is asked on it (the prompter itself when
// it has no Show of its own).
func TestNotTaken(t *testing.T) {
	r := newRig(t, config.ProposalsManual)
	r.m.o.Netd, r.m.o.RequireTerminal = nil, true
	asked := make(chan escprompt.PromptRequest, 1)
	sess := &eschost.Session{ID: "s1", Prompt: promptFunc(func(pr escprompt.PromptRequest) escprompt.Answer {
		asked <- pr
		return escprompt.Answer{Action: escprompt.Approve}
	})}
	if got := r.m.Propose(context.Background(), eschost.Proposal{Kind: "net", Target: "example.org", Session: sess}); got.Status != eschost.ProposalRefused ||
		!strings.Contains(got.Message, "allow_domains") {
		t.Fatalf("net without netd: %+v", got)
	}
	if got := r.m.Propose(context.Background(), eschost.Proposal{Kind: "exec", Argv: []string{"cat", "x"}, Session: &eschost.Session{ID: "s2"}}); got.Status != eschost.ProposalRefused ||
		!strings.Contains(got.Message, "no terminal") {
		t.Fatalf("no terminal: %+v", got)
	}
	got := r.m.Propose(context.Background(), eschost.Proposal{Kind: "exec", Argv: []string{"cat", "x"}, Session: sess})
	if pr := <-asked; !pr.Proposal || pr.Argv[1] != "cat x" {
		t.Fatalf("asked: %+v", pr)
	}
	if w, err := r.m.Wait(context.Background(), got.ID); err != nil || w.Status != eschost.ProposalApproved || len(r.rules.Rules()) != 1 {
		t.Fatalf("%+v %v %q", w, err, r.rules.Rules())
	}
}

type promptFunc func(escprompt.PromptRequest) escprompt.Answer

func (f promptFunc) Prompt(_ context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	return f(r), nil
}

func TestDenials(t *testing.T) {
	r := newRig(t, config.ProposalsManual)
	if _, err := r.m.Denials(context.Background()); err != nil {
		t.Fatal(err)
	}
}
