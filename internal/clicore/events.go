package clicore

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// EventPrinter prints events in order (the client hands them over one at
// a time).
// The stream of a local sandbox ends with sandbox.stopped; a cluster
// session's with session.ended, one per session it follows (Sessions).
type EventPrinter struct {
	W    io.Writer
	JSON bool
	// Sessions is how many cluster sessions' streams it prints (0: a
	// local sandbox's one stream).
	Sessions int
	mu       sync.Mutex
	stop     bool
	ended    int
}

// Ended reports whether every stream printed its end.
func (p *EventPrinter) Ended() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stop || (p.Sessions > 0 && p.ended >= p.Sessions)
}

// Print prints one event.
func (p *EventPrinter) Print(e ctl.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Kind {
	case ctl.EventSandboxStopped:
		p.stop = true
	case ctl.EventSessionEnded:
		p.ended++
	}
	if p.JSON {
		// The coordinator's own encoding of the event; Detail is escaped
		// already, and encoding/json escapes what JSON must.
		b, _ := json.Marshal(e)
		fmt.Fprintf(p.W, "%s\n", b)
		return
	}
	fmt.Fprintln(p.W, EventLine(e))
}

// EventLine is one readable line: time, sequence, kind and the fields
// the event has; every field escaped (visible.Line), so that nothing in it
// breaks the line or acts on the terminal.
func EventLine(e ctl.Event) string {
	parts := []string{e.Time.Local().Format(time.TimeOnly), fmt.Sprintf("#%d", e.Seq), visible.Line(e.Kind)}
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+visible.Line(v))
		}
	}
	if e.Session != "" {
		add("session", e.Session[:min(12, len(e.Session))])
	}
	add("request", e.Request)
	add("kind", e.RequestKind)
	add("decision", e.Decision)
	add("from", e.From)
	add("reason", e.Reason)
	if e.Detail != "" {
		parts = append(parts, "detail="+truncate(visible.Line(e.Detail), 120))
	}
	return strings.Join(parts, " ")
}
