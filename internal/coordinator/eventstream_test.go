package coordinator

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/events"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// TestSessionStateEventsAndStatus: a kept session's reports become
// session.detached / session.attached / agent.attention events and the
// kept and detached flags of its status, and the event stream reaches a
// subscriber on the control socket in order.
func TestSessionStateEventsAndStatus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := ctlserver.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	c := &coordinator{srv: ctlserver.NewServer(os.Getuid(), nil), events: events.New("dev", "/w"), kept: map[string]ctl.SessionState{}}
	c.approvals = approvals.New(c.events, config.AnswerFromAny)
	c.srv.Attached = func(s *ctlserver.Session) error { c.sessionAttached(s); return nil }
	c.srv.Handle(ctl.TypeEventsSubscribe, c.handleEventsSubscribe)
	c.srv.Handle(ctl.TypeSessionState, c.handleSessionState)
	go c.srv.Serve(ln)
	t.Cleanup(func() { c.srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	watcher := ctl.NewClient(nil)
	if err := watcher.Connect(ctx, path, ctl.Hello{}); err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	got := make(chan ctl.Event, 16)
	if err := watcher.SubscribeEvents(ctx, 0, func(e ctl.Event) { got <- e }); err != nil {
		t.Fatal(err)
	}
	const id = "0123456789abcdef0123456789abcdef"
	kept := ctl.NewClient(nil)
	if err := kept.Connect(ctx, path, ctl.Hello{Session: &ctl.SessionInfo{ID: id, PID: 1, TTY: true}}); err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	report := func(st ctl.SessionState) {
		if err := kept.SessionState(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	report(ctl.SessionState{Kept: true, Attached: true}) // the start: no event
	report(ctl.SessionState{Kept: true, Attached: false})
	report(ctl.SessionState{Kept: true, Attached: false, Attention: true})
	if st := c.sessionStatus(c.srv.Session(id)); !st.Kept || !st.Detached {
		t.Fatalf("status %+v", st)
	}
	report(ctl.SessionState{Kept: true, Attached: true})
	want := []string{ctl.EventSessionStarted, ctl.EventSessionDetached, ctl.EventAgentAttention, ctl.EventSessionAttached}
	var last uint64
	for _, kind := range want {
		e := <-got
		if e.Kind != kind || e.Seq <= last || (kind != ctl.EventSessionStarted && e.Session != id) {
			t.Fatalf("event %+v, want %s after seq %d", e, kind, last)
		}
		last = e.Seq
	}
}
