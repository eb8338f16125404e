package notify

import (
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// TestLimiterWindows drives the limiter on a made-up clock: one denial
// per window, the rest merged into one summary when the window has room;
// pending requests 3 a minute here (PendingPerMinute in production).
func TestLimiterWindows(t *testing.T) {
	l := newLimiter(10*time.Second, 3)
	t0 := time.Unix(1000, 0)
	denied := Notice{Event: ctl.Event{Kind: ctl.EventNetDenied}}
	if _, ok := l.admit(denied, t0); !ok {
		t.Fatal("first denial held")
	}
	for i := range 5 {
		if _, ok := l.admit(denied, t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatal("denial within the window sent")
		}
	}
	if at, ok := l.next(); !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("next %v %v", at, ok)
	}
	if d := l.due(t0.Add(9 * time.Second)); len(d) != 0 {
		t.Fatalf("due early: %+v", d)
	}
	d := l.due(t0.Add(10 * time.Second))
	if len(d) != 1 || d[0].Merged != 5 {
		t.Fatalf("summary %+v", d)
	}
	// The summary used the new window: the next denial waits for it.
	if _, ok := l.admit(denied, t0.Add(11*time.Second)); ok {
		t.Fatal("denial right after a summary sent")
	}
	if _, ok := l.admit(denied, t0.Add(30*time.Second)); ok {
		t.Fatal("a denial overtook the held one")
	}
	if d := l.due(t0.Add(30 * time.Second)); len(d) != 1 || d[0].Merged != 2 {
		t.Fatalf("second summary %+v", d)
	}

	p := Notice{Event: ctl.Event{Kind: ctl.EventApprovalPending}}
	sent := 0
	for i := range 10 {
		if _, ok := l.admit(p, t0.Add(time.Duration(i)*time.Second)); ok {
			sent++
		}
	}
	if sent != 3 {
		t.Fatalf("%d pending sent in a minute, want 3", sent)
	}
	if f := l.flush(); len(f) != 1 || f[0].Kind != ctl.EventApprovalPending || f[0].Merged != 7 {
		t.Fatalf("flush %+v", f)
	}
}
