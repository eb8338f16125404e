package netd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

func TestEventRingBoundedWithGap(t *testing.T) {
	e := newEventRing()
	for i := range maxEvents + 10 {
		e.push(netdapi.DenialEvent{Dest: fmt.Sprintf("tcp 192.0.3.%d:80", i%250)})
	}
	evs, seq := e.wait(context.Background(), 0, 0)
	if len(evs) != maxEvents || seq != maxEvents+10 || evs[0].Seq != 11 {
		t.Fatalf("ring: %d events, seq %d, first %d", len(evs), seq, evs[0].Seq)
	}
	evs, _ = e.wait(context.Background(), seq-2, 0)
	if len(evs) != 2 || evs[1].Seq != seq {
		t.Fatalf("after %d: %+v", seq-2, evs)
	}
	// A long poll returns at the next push.
	go func() { time.Sleep(50 * time.Millisecond); e.push(netdapi.DenialEvent{Dest: "dns x.example"}) }()
	evs, _ = e.wait(context.Background(), seq, time.Minute)
	if len(evs) != 1 || evs[0].Dest != "dns x.example" {
		t.Fatalf("long poll: %+v", evs)
	}
}

func TestHoldsCoalesceAndBound(t *testing.T) {
	h := newHolds()
	if hd, _, _ := h.join("a.example"); hd != nil {
		t.Fatal("held while holding is off")
	}
	h.setDuration(time.Minute)
	a1, first1, _ := h.join("a.example")
	a2, first2, _ := h.join("a.example")
	if a1 == nil || a1 != a2 || !first1 || first2 {
		t.Fatal("identical names are not coalesced")
	}
	for i := range maxWaiters - 2 {
		if hd, _, _ := h.join("a.example"); hd == nil {
			t.Fatalf("waiter %d refused", i)
		}
	}
	if hd, _, _ := h.join("a.example"); hd != nil {
		t.Fatal("waiters on one name are not bounded")
	}
	for i := 1; i < maxHolds; i++ {
		if hd, _, _ := h.join(fmt.Sprintf("n%d.example", i)); hd == nil {
			t.Fatalf("name %d refused", i)
		}
	}
	if hd, _, _ := h.join("over.example"); hd != nil {
		t.Fatal("held names are not bounded")
	}
	h.decide("a.example", true)
	if !h.await(context.Background(), "a.example", a1, time.Minute) {
		t.Fatal("allowed decision not seen")
	}
	if hd, _, _ := h.join("a.example"); hd != nil {
		t.Fatal("a decided name is held again")
	}
	// The freed slot serves another name; without a decision it expires.
	b, _, _ := h.join("over.example")
	if b == nil || h.await(context.Background(), "over.example", b, time.Millisecond) {
		t.Fatal("an expired hold is not a denial")
	}
}

// TestResolveHoldsUntilDenied: with holding on, a query for a name outside
// allow_domains waits, is reported once as held (the retry coalesces), and
// gets NXDOMAIN once the user denies it; a name that could never be listed
// (an address) is denied at once and reported unheld.
func TestResolveHoldsUntilDenied(t *testing.T) {
	d, err := New(Config{Policy: testPolicy(t)})
	if err != nil {
		t.Fatal(err)
	}
	d.holds.setDuration(time.Minute)
	ctx := context.Background()
	out := make(chan []byte, 2)
	for range 2 {
		go func() { out <- d.resolve(ctx, mkQuery(t, "new.example.", dnsmessage.TypeA)) }()
	}
	evs, seq := d.events.wait(ctx, 0, time.Minute)
	if len(evs) != 1 || !evs[0].Held || evs[0].Name != "new.example" {
		t.Fatalf("events: %+v", evs)
	}
	select {
	case <-out:
		t.Fatal("answered before the decision")
	case <-time.After(100 * time.Millisecond):
	}
	if r := d.handle(ctx, netdapi.Request{Version: netdapi.Version, Op: netdapi.OpDecide, Target: "new.example", Reason: "test"}); !r.OK {
		t.Fatal(r.Error)
	}
	for range 2 {
		var m dnsmessage.Message
		if err := m.Unpack(<-out); err != nil || m.RCode != dnsmessage.RCodeNameError {
			t.Fatalf("after deny: %v %v", m.RCode, err)
		}
	}
	d.resolve(ctx, mkQuery(t, "10.1.2.3.", dnsmessage.TypeA))
	evs, _ = d.events.wait(ctx, seq, 0)
	if len(evs) != 1 || evs[0].Held {
		t.Fatalf("an unlistable name: %+v", evs)
	}
	if r := d.handle(ctx, netdapi.Request{Version: netdapi.Version, Op: netdapi.OpDecide, Target: "*.example.com", Allow: true}); r.OK {
		t.Fatal("a wildcard was accepted as a decision")
	}
}
