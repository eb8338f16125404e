package coordinator

import (
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// TestRefcount checks the reference counting of the coordinator: the last
// detach asks for teardown, which refuses new sessions; a session that
// attaches before the check keeps the sandbox.
func TestRefcount(t *testing.T) {
	c := &coordinator{wake: make(chan struct{}, 1), o: Options{Anchor: &domain.Anchor{Profile: "default"}}}
	s := &ctlserver.Session{}
	if err := c.attached(s); err != nil {
		t.Fatal(err)
	}
	if err := c.attached(s); err != nil {
		t.Fatal(err)
	}
	c.detached(s)
	select {
	case <-c.wake:
		t.Fatal("woken with one session left")
	default:
	}
	c.detached(s)
	select {
	case <-c.wake:
	default:
		t.Fatal("not woken at zero")
	}
	// A session attaching before the coordinator acts on the wake-up
	// keeps the sandbox.
	if err := c.attached(s); err != nil {
		t.Fatal(err)
	}
	if c.shutdown(ReasonLastDetach, true) {
		t.Fatal("shut down with a session attached")
	}
	c.detached(s)
	if !c.shutdown(ReasonLastDetach, true) {
		t.Fatal("no shutdown at zero")
	}
	if err := c.attached(s); !errors.Is(err, ctl.ErrShuttingDown) {
		t.Fatalf("attach during shutdown: %v", err)
	}
}

func TestRefcountRace(t *testing.T) {
	c := &coordinator{wake: make(chan struct{}, 1), o: Options{Anchor: &domain.Anchor{Profile: "default"}}}
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &ctlserver.Session{}
			if c.attached(s) == nil {
				c.detached(s)
			}
		}()
	}
	wg.Wait()
	if c.refs != 0 {
		t.Fatalf("refs = %d", c.refs)
	}
}

func TestListenRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			nc.Close()
		}
	}()
	if _, err := listen(path); err == nil || !strings.Contains(err.Error(), "another coordinator") {
		t.Fatalf("second listen: %v", err)
	}
	ln.Close()
	// Now dead: replaced.
	ln2, err := listen(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln2.Close()
	var _ net.Listener = ln2
}

// TestStopReason: a stop without a cause is `lazaret stop`; the escalation
// prompt's Q is recorded as such; any other cause is refused (no
// free-text reason from a client reaches the audit trail).
func TestStopReason(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    string
	}{
		{"", ReasonStopped},
		{`{}`, ReasonStopped},
		{`{"cause":"escalation_abort"}`, ReasonAborted},
		{`{"cause":"anything the client likes"}`, ""},
		{`[1]`, ""},
	} {
		got, err := stopReason(&ctlserver.Request{Request: ctl.Request{Type: ctl.TypeStop, Payload: json.RawMessage(tc.payload)}})
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("payload %q: %q, %v; want %q", tc.payload, got, err, tc.want)
		}
	}
}
