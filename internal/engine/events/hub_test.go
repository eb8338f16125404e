package events

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

func TestHubNumbersAndReplays(t *testing.T) {
	h := New("dev", "/w")
	h.Publish(ctl.Event{Kind: ctl.EventSessionStarted})
	h.Publish(ctl.Event{Kind: ctl.EventApprovalPending, Request: "r1"})
	ch, stop := h.Subscribe(1)
	defer stop()
	e := <-ch
	if e.Seq != 2 || e.Kind != ctl.EventApprovalPending || e.V != ctl.EventsVersion || e.Profile != "dev" || e.Workspace != "/w" {
		t.Fatalf("replayed %+v", e)
	}
	h.Publish(ctl.Event{Kind: ctl.EventSandboxStopped})
	if e := <-ch; e.Seq != 3 {
		t.Fatalf("live %+v", e)
	}
}

func TestHubDropsSlowSubscriber(t *testing.T) {
	h := New("dev", "/w")
	ch, stop := h.Subscribe(0)
	defer stop()
	for range subscriberBuffer + 1 {
		h.Publish(ctl.Event{Kind: ctl.EventNetDenied})
	}
	n := 0
	for range ch {
		n++
	}
	if n != subscriberBuffer {
		t.Fatalf("got %d events before the close, want %d", n, subscriberBuffer)
	}
	// Control: a reader that keeps up is not dropped.
	ch2, stop2 := h.Subscribe(h.seq)
	defer stop2()
	for range subscriberBuffer + 1 {
		h.Publish(ctl.Event{Kind: ctl.EventNetDenied})
		if _, ok := <-ch2; !ok {
			t.Fatal("a reader that keeps up was dropped")
		}
	}
}

func TestHubKeepsBounded(t *testing.T) {
	h := New("dev", "/w")
	for range Keep * 3 {
		h.Publish(ctl.Event{Kind: ctl.EventAgentAttention})
	}
	if len(h.past) != Keep || h.past[0].Seq != uint64(2*Keep+1) {
		t.Fatalf("kept %d from %d", len(h.past), h.past[0].Seq)
	}
}
