package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi/netdtest"
)

// decided lists netd's decide requests as name=allow.
func decided(f *netdtest.Server) []string {
	var out []string
	for _, r := range f.Requests() {
		if r.Op == netdapi.OpDecide {
			out = append(out, fmt.Sprintf("%s=%v", r.Target, r.Allow))
		}
	}
	return out
}

// TestDenialRouterCoalescesAndBounds: identical held names are queued
// once; the queue is bounded; past the prompt rate a held name is denied
// at once (not left waiting) instead of being queued.
func TestDenialRouterCoalescesAndBounds(t *testing.T) {
	f, cl := netdtest.Serve(t, "")
	d := &Deps{Profile: &config.Profile{Name: "default"}, Server: ctlserver.NewServer(os.Getuid(), nil), Log: slog.New(slog.DiscardHandler)}
	r := &denialRouter{d: d, ignored: map[string]bool{}, queued: map[string]bool{}, queue: make(chan heldName, maxQueued), cl: cl, lim: sidecar.NewLimiter()}
	ctx := context.Background()
	for range 3 {
		r.event(ctx, netdapi.DenialEvent{Dest: "dns a.example", Name: "a.example", Held: true})
	}
	if len(r.queue) != 1 {
		t.Fatalf("%d queued for one name", len(r.queue))
	}
	for i := range maxPrompts + 3 {
		r.event(ctx, netdapi.DenialEvent{Dest: "dns x", Name: fmt.Sprintf("n%d.example", i), Held: true})
	}
	if len(r.queue) != maxPrompts {
		t.Fatalf("%d queued, want the prompt rate %d", len(r.queue), maxPrompts)
	}
	if got := decided(f); len(got) != 4 || got[0] != fmt.Sprintf("n%d.example=false", maxPrompts-1) {
		t.Fatalf("names past the limit not denied at once: %v", got)
	}
	// An ignored name is neither queued nor decided again.
	r.ignored["i.example"] = true
	r.event(ctx, netdapi.DenialEvent{Dest: "dns i.example", Name: "i.example", Held: true})
	if len(decided(f)) != 4 || len(r.queue) != maxPrompts {
		t.Fatal("an ignored name was routed")
	}
	// The window moves on.
	if !r.mayPrompt(time.Now().Add(promptWindow)) {
		t.Fatal("prompts refused after the window")
	}
}

// TestDenialRouterSkipsExpired: a name whose lookup stopped waiting while
// it was queued is not shown (the next one is, at once): it is denied and
// audited as never shown because its request ended, not as "not asked
// (no terminal)".
func TestDenialRouterSkipsExpired(t *testing.T) {
	f, cl := netdtest.Serve(t, "")
	var got []audit.Entry
	d := &Deps{Profile: &config.Profile{Name: "default"}, Server: ctlserver.NewServer(os.Getuid(), nil), Log: slog.New(slog.DiscardHandler),
		Audit: func(_ context.Context, e audit.Entry) (uint64, error) { got = append(got, e); return 1, nil }}
	r := &denialRouter{d: d, ignored: map[string]bool{}, queued: map[string]bool{}, queue: make(chan heldName, maxQueued), cl: cl, lim: sidecar.NewLimiter()}
	start := time.Now()
	r.ask(context.Background(), cl, heldName{"late.example", time.Now().Add(-time.Second)})
	if time.Since(start) > time.Second {
		t.Fatalf("an expired name held the queue %v", time.Since(start))
	}
	if dec := decided(f); len(dec) != 1 || dec[0] != "late.example=false" {
		t.Fatalf("decisions %v", dec)
	}
	if len(got) != 1 || got[0].Fields["decision"] != "not shown: the request ended while queued (expired)" || got[0].Fields["shown_on"] != "" {
		t.Fatalf("audit %+v", got)
	}
}

// TestDecisionOf: the audit trail says what really happened to a prompt.
func TestDecisionOf(t *testing.T) {
	for _, c := range []struct {
		ans   ctl.NetAnswer
		shown bool
		want  string
	}{
		{ctl.NetAnswer{Choice: ctl.NetDeny}, true, "denied"},
		{ctl.NetAnswer{Choice: ctl.NetNone, Withdrawn: "expired"}, true, "withdrawn: the request ended (expired)"},
		{ctl.NetAnswer{Choice: ctl.NetNone, Withdrawn: "expired"}, false, "not shown: the request ended while queued (expired)"},
		{ctl.NetAnswer{Choice: ctl.NetNone}, false, "not asked (no terminal)"},
	} {
		if got := decisionOf(c.ans, c.shown); got != c.want {
			t.Errorf("%+v shown=%v: %q, want %q", c.ans, c.shown, got, c.want)
		}
	}
}

// TestHoldEnd: a name's prompt ends when netd's hold of it does.
func TestHoldEnd(t *testing.T) {
	now := time.Now()
	if got := holdEnd(now.Add(-10*time.Second), now); !got.Equal(now.Add(holdFor - 10*time.Second)) {
		t.Fatalf("holdEnd %v", got.Sub(now))
	}
	if got := holdEnd(time.Time{}, now); !got.Equal(now.Add(holdFor)) {
		t.Fatalf("holdEnd without a time %v", got.Sub(now))
	}
}

// TestNetworkAnswerThroughTheHub: an approval from `lazaret approvals`
// allows the name for this run (as "once"), a denial denies it, and a
// withdrawal leaves it unanswered.
func TestNetworkAnswerThroughTheHub(t *testing.T) {
	for action, want := range map[string]string{ctl.ActionApprove: ctl.NetOnce, ctl.ActionDeny: ctl.NetDeny, ctl.DecisionWithdrawn: ctl.NetNone} {
		o := hubOutcome(approvals.Decision{Action: action, From: "lazaret approvals (pid 1, uid 2)"})
		if o.ans.Choice != want {
			t.Errorf("%s: choice %q, want %q", action, o.ans.Choice, want)
		}
	}
	if netAction(ctl.NetAlways) != ctl.ActionApprove || netAction(ctl.NetIgnore) != ctl.ActionDeny {
		t.Fatal("network answers map to the wrong hub actions")
	}
}
