package proposal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// TestNetLimit: a backend's NetLimit (lazaret-kube's: no address or
// CIDR while the pod runs) refuses what it names, after the checker: a
// candidate the checker refuses is refused with the checker's findings
// exactly as without a limit, and a rule the limit takes is held as
// locally (the positive control). Each refusal leaves only its audit
// line.
func TestNetLimit(t *testing.T) {
	for _, mode := range []string{config.ProposalsManual, config.ProposalsAuto} {
		r := newRig(t, mode)
		asked := []string{}
		r.m.o.NetLimit = func(_ context.Context, rule string) string {
			asked = append(asked, rule)
			if strings.Contains(rule, "/") {
				return "not here: allow_egress"
			}
			return ""
		}
		got := r.m.Propose(context.Background(), net("8.8.8.0/24"))
		if got.Status != eschost.ProposalRefused || got.Message != "not here: allow_egress" || got.ID != "" {
			t.Errorf("%s: CIDR: %+v", mode, got)
		}
		got = r.m.Propose(context.Background(), net("*"))
		if got.Status != eschost.ProposalRefused || !strings.Contains(got.Message, "too-broad") {
			t.Errorf("%s: the checker's refusal: %+v", mode, got)
		}
		got = r.m.Propose(context.Background(), net("docs.example.org"))
		want := eschost.ProposalPending
		if mode == config.ProposalsAuto {
			want = eschost.ProposalApproved
		}
		if got.Status != want {
			t.Errorf("%s: a name: %+v, want %s", mode, got, want)
		}
		if strings.Join(asked, " ") != "8.8.8.0/24 docs.example.org" {
			t.Errorf("%s: NetLimit asked about %q (not about what the checker refused)", mode, asked)
		}
		if len(r.m.List()) != 1 {
			t.Errorf("%s: stored %+v, want only the name", mode, r.m.List())
		}
		refused := 0
		for _, f := range r.audited("proposal") {
			if strings.HasPrefix(f["outcome"], "refused") {
				refused++
			}
		}
		if refused != 2 {
			t.Errorf("%s: %d refusals audited, want 2", mode, refused)
		}
	}
}

// failingNetd is a netd that does not answer.
type failingNetd struct{}

func (failingNetd) Status(context.Context) (*netdapi.Status, error) {
	return nil, errors.New("exec: pod gone")
}
func (failingNetd) Allow(context.Context, string, time.Duration, string) (*netdapi.Status, error) {
	return nil, errors.New("exec: pod gone")
}
func (failingNetd) Decide(context.Context, string, bool, string) error {
	return errors.New("exec: pod gone")
}

// TestNetdDoesNotAnswer: a network proposal is refused at once when the
// sandbox's netd does not answer (nothing could apply it, and the
// checker would not have seen the live allowlist); an exec proposal is
// still taken (the control).
func TestNetdDoesNotAnswer(t *testing.T) {
	r := newRig(t, config.ProposalsManual)
	r.m.o.Netd = failingNetd{}
	got := r.m.Propose(context.Background(), net("docs.example.org"))
	if got.Status != eschost.ProposalRefused || !strings.Contains(got.Message, "does not answer") || strings.Contains(got.Message, "pod gone") {
		t.Errorf("net: %+v", got)
	}
	got = r.m.Propose(context.Background(), eschost.Proposal{Kind: "exec", Argv: []string{"cat", "x"}, Session: &eschost.Session{ID: "s1"}})
	if got.Status != eschost.ProposalPending {
		t.Errorf("exec: %+v", got)
	}
}
