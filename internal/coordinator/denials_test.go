package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/ctl"
	"github.com/lazaret-dev/lazaret/internal/netdapi"
	"github.com/lazaret-dev/lazaret/internal/netdapi/netdtest"
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
	d := &Deps{Profile: &config.Profile{Name: "default"}, Server: ctl.NewServer(os.Getuid(), nil), Log: slog.New(slog.DiscardHandler)}
	r := &denialRouter{d: d, ignored: map[string]bool{}, queued: map[string]bool{}, queue: make(chan string, maxQueued), cl: cl, lim: sidecar.NewLimiter()}
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
