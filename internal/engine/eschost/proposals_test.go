package eschost

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProposals records what reaches the handler.
type fakeProposals struct {
	mu   sync.Mutex
	got  []Proposal
	wait map[string]ProposalReply
}

func (f *fakeProposals) Propose(_ context.Context, p Proposal) ProposalReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, p)
	if p.Target == "10.0.0.1" {
		return ProposalReply{Status: ProposalRefused, Message: "10.0.0.1 reaches private-use"}
	}
	return ProposalReply{ID: "0123abcd", Status: ProposalPending, Message: "awaits the user"}
}

func (f *fakeProposals) Wait(_ context.Context, id string) (ProposalReply, error) {
	if r, ok := f.wait[id]; ok {
		return r, nil
	}
	return ProposalReply{}, errors.New("no proposal " + id)
}

func (f *fakeProposals) Denials(context.Context) ([]string, error) {
	return []string{"dns blocked.test ×2"}, nil
}

func (f *fakeProposals) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

// clock is a settable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func proposalRig(t *testing.T) (*rig, *fakeProposals, *clock) {
	h := &fakeProposals{wait: map[string]ProposalReply{
		"0123abcd": {ID: "0123abcd", Status: ProposalApproved},
		"0badc0de": {ID: "0badc0de", Status: ProposalDenied, Message: "denied by the user"},
	}}
	c := &clock{t: time.Now()}
	r := newRigWith(t, func(cfg *Config) { cfg.Proposals, cfg.Now = h, c.now })
	return r, h, c
}

// TestProposalReachesHandler: a verified proposal reaches the handler
// with its fields; the id is printed; a refusal exits 126; --wait exits 0
// approved, 1 denied; --denials prints the handler's lines. No proposal
// ever runs a host command.
func TestProposalReachesHandler(t *testing.T) {
	r, h, _ := proposalRig(t)
	code, out, errOut := r.escalate(r.env(), "--propose", "net", "example.org:443", "--why", "docs")
	if code != 0 || out != "0123abcd\n" || !strings.Contains(errOut, "awaits the user") {
		t.Fatalf("propose: %d %q %q", code, out, errOut)
	}
	p := h.got[0]
	if p.Kind != "net" || p.Target != "example.org:443" || p.Why != "docs" || p.Session == nil || p.Session.ID != r.sess.ID {
		t.Fatalf("handler got %+v", p)
	}
	code, _, _ = r.escalate(r.env(), "--propose", "exec", "--why", "lint", "--", "make", "lint")
	if code != 0 || h.count() != 2 || !slices.Equal(h.got[1].Argv, []string{"make", "lint"}) || h.got[1].Why != "lint" {
		t.Fatalf("exec proposal: %d %+v", code, h.got)
	}
	if code, _, errOut = r.escalate(r.env(), "--propose", "net", "10.0.0.1"); code != 126 || !strings.Contains(errOut, "refused: 10.0.0.1") {
		t.Fatalf("refusal: %d %q", code, errOut)
	}
	if code, _, _ = r.escalate(r.env(), "--wait", "0123abcd"); code != 0 {
		t.Errorf("--wait approved: %d", code)
	}
	if code, _, errOut = r.escalate(r.env(), "--wait", "0badc0de"); code != 1 || !strings.Contains(errOut, "denied by the user") {
		t.Errorf("--wait denied: %d %q", code, errOut)
	}
	if code, _, errOut = r.escalate(r.env(), "--wait", "ffffffff"); code != 125 || !strings.Contains(errOut, "no proposal") {
		t.Errorf("--wait unknown: %d %q", code, errOut)
	}
	if code, out, _ = r.escalate(r.env(), "--denials"); code != 0 || out != "dns blocked.test ×2\n" {
		t.Errorf("--denials: %d %q", code, out)
	}
	if n := r.eventCount(EventResult); n != 0 {
		t.Errorf("%d host commands ran", n)
	}
}

// TestProposalUsage: bad command lines are usage errors naming the flag,
// and nothing is sent.
func TestProposalUsage(t *testing.T) {
	r, h, _ := proposalRig(t)
	for _, args := range [][]string{
		{"--propose", "dns", "x"}, {"--propose", "net"}, {"--propose", "net", "a", "b"},
		{"--propose", "exec"}, {"--wait", "xyz"}, {"--wait", "0123abcd", "x"}, {"--denials", "x"},
		{"--propose", "net", "a", "--wait", "0123abcd"}, {"--shell", "ls", "--denials"},
		{"--propose", "net", strings.Repeat("a", 10<<10)},
	} {
		code, _, errOut := r.escalate(r.env(), args...)
		if code != 2 || !strings.HasPrefix(errOut, "lazaret-escalate: ") {
			t.Errorf("%q: %d %q", args[:min(len(args), 3)], code, errOut[:min(len(errOut), 100)])
		}
	}
	if h.count() != 0 {
		t.Errorf("%d proposals sent", h.count())
	}
}

// TestProposalRateLimit: a burst of ProposalBurst, then one per
// ProposalEvery per session; over it the request is refused before the
// handler with a rejection audited (stage rate). The clock is the test's.
func TestProposalRateLimit(t *testing.T) {
	r, h, c := proposalRig(t)
	for i := range ProposalBurst {
		if code, _, errOut := r.escalate(r.env(), "--propose", "net", "example.org"); code != 0 {
			t.Fatalf("proposal %d of the burst: %d %q", i, code, errOut)
		}
	}
	code, _, errOut := r.escalate(r.env(), "--propose", "net", "example.org")
	if code != 126 || !strings.Contains(errOut, "too many proposals") || h.count() != ProposalBurst {
		t.Fatalf("over the burst: %d %q, handler saw %d", code, errOut, h.count())
	}
	if r.lastRejection() != StageRate {
		t.Errorf("rejection stage %q, want %q", r.lastRejection(), StageRate)
	}
	// --wait and --denials are not proposals: never limited.
	if code, _, _ := r.escalate(r.env(), "--denials"); code != 0 {
		t.Errorf("--denials limited: %d", code)
	}
	c.add(ProposalEvery)
	if code, _, _ := r.escalate(r.env(), "--propose", "net", "example.org"); code != 0 {
		t.Fatalf("after %v: %d", ProposalEvery, code)
	}
	if code, _, _ := r.escalate(r.env(), "--propose", "net", "example.org"); code != 126 {
		t.Fatalf("second after %v: %d", ProposalEvery, code)
	}
}

func TestRateLimiterBounded(t *testing.T) {
	var l rateLimiter
	now := time.Unix(1e9, 0)
	for i := range maxBuckets + 10 {
		l.take(strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), now)
	}
	if len(l.buckets) > maxBuckets {
		t.Fatalf("%d buckets", len(l.buckets))
	}
}

// TestNoProposalHandlerRefuses: a server without a handler refuses
// every proposal (a denial, not a host command).
func TestNoProposalHandlerRefuses(t *testing.T) {
	r := newRig(t)
	if code, _, errOut := r.escalate(r.env(), "--propose", "net", "example.org"); code != 126 || !strings.Contains(errOut, "no policy proposals") {
		t.Fatalf("%d %q", code, errOut)
	}
}

func TestPolicyAddRule(t *testing.T) {
	p := &Policy{AutoApprove: [][]string{{"make", "lint"}}}
	if p.AddRule([]string{"make", "lint"}) || !p.AddRule([]string{"go", "test"}) || len(p.Rules()) != 2 {
		t.Fatalf("AddRule: %q", p.Rules())
	}
}
