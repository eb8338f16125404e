package kubecli

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
)

func newEscTest(frame string) *escSession {
	return &escSession{frame: []byte(frame), ready: make(chan struct{})}
}

// TestFrameWaitsForTheMarker: the delegation frame goes to the holder's
// stdin only after the marker arrived on its stdout; the marker never
// reaches the user's output; the user's stdin follows the frame.
func TestFrameWaitsForTheMarker(t *testing.T) {
	e := newEscTest("0004key\n")
	var out bytes.Buffer
	in, w := e.streams(strings.NewReader("typed"), &out)
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(in); got <- b }()
	select {
	case b := <-got:
		t.Fatalf("stdin read %q before the marker", b)
	case <-time.After(50 * time.Millisecond):
	}
	// The marker in two pieces, output right behind it.
	m := session.HolderReady
	_, _ = w.Write([]byte(m[:5]))
	_, _ = w.Write([]byte(m[5:] + "$ prompt"))
	if b := <-got; string(b) != "0004key\ntyped" {
		t.Fatalf("stdin = %q", b)
	}
	if out.String() != "$ prompt" {
		t.Fatalf("output = %q", out.String())
	}
}

// TestNoMarkerNoFrame: output that does not start with the marker passes
// unchanged and the frame is never sent (an older holder, an error).
func TestNoMarkerNoFrame(t *testing.T) {
	e := newEscTest("0004key\n")
	var out bytes.Buffer
	_, w := e.streams(nil, &out)
	_, _ = w.Write([]byte("\x1b_lazaret"))
	_, _ = w.Write([]byte("-other"))
	if out.String() != "\x1b_lazaret-other" {
		t.Fatalf("output = %q", out.String())
	}
	select {
	case <-e.ready:
		t.Fatal("ready without the marker")
	default:
	}
}

// FuzzMarkerStrip: whatever the pod writes, in whatever pieces, the user
// sees it unchanged, minus the marker when it leads the stream.
func FuzzMarkerStrip(f *testing.F) {
	f.Add([]byte(session.HolderReady+"hello"), 3)
	f.Add([]byte("plain output"), 1)
	f.Add([]byte(session.HolderReady[:4]), 2)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		e := newEscTest("x")
		var out bytes.Buffer
		_, w := e.streams(nil, &out)
		if cut < 0 || cut > len(data) {
			cut = len(data) / 2
		}
		_, _ = w.Write(data[:cut])
		_, _ = w.Write(data[cut:])
		want := data
		if bytes.HasPrefix(data, []byte(session.HolderReady)) {
			want = data[len(session.HolderReady):]
		} else if len(data) < len(session.HolderReady) && bytes.HasPrefix([]byte(session.HolderReady), data) {
			want = nil // a prefix of the marker is held until more comes
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("output %q, want %q", out.Bytes(), want)
		}
	})
}

// TestSessionCommand: under the holder in --stdin mode with the relay's
// paths; without a terminal the pid-recording sh inside it, as without
// escalation.
func TestSessionCommand(t *testing.T) {
	e := &escSession{dir: "/run/lazaret/kube/S"}
	holder := "/lazaret/lazaret-escalate __session --stdin --path-append /lazaret --env LAZARET_ESCALATE_FALLBACK=/lazaret/lazaret-escalate-go --env LAZARET_ESCALATE_SOCKET=/run/lazaret/kube/S/sock --env LAZARET_TLS_DIR=/run/lazaret/kube/S/tls -- "
	pidsh := `/bin/sh -c echo $$ 2>/dev/null >"$0"; exec "$@" /tmp/p `
	for _, c := range []struct {
		e    *escSession
		tty  bool
		want string
	}{{e, false, holder + pidsh + "make"}, {e, true, holder + "make"}, {nil, false, pidsh + "make"}, {nil, true, "make"}} {
		if got := strings.Join(sessionCommand(c.e, []string{"make"}, "/tmp/p", c.tty), " "); got != c.want {
			t.Errorf("escalation %v, tty %v:\n got  %s\n want %s", c.e != nil, c.tty, got, c.want)
		}
	}
}

// TestResumedStreams: a session taken back sends no frame (its holder
// has its delegation) and waits for no marker: the user's keys go
// straight on, while the marker at the start of the replayed output is
// still taken out. Control: a new session's stdin waits for the marker.
func TestResumedStreams(t *testing.T) {
	e := newEscTest("")
	e.resumed = true
	var out bytes.Buffer
	in, w := e.streams(strings.NewReader("typed"), &out)
	if b, _ := io.ReadAll(in); string(b) != "typed" {
		t.Fatalf("stdin = %q", b)
	}
	_, _ = w.Write([]byte(session.HolderReady + "replayed"))
	if out.String() != "replayed" {
		t.Fatalf("output = %q", out.String())
	}

	control := newEscTest("0004key\n")
	cin, _ := control.streams(strings.NewReader("typed"), io.Discard)
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(cin); got <- b }()
	select {
	case b := <-got:
		t.Fatalf("control: a new session's stdin read %q before the marker", b)
	case <-time.After(50 * time.Millisecond):
	}
	close(control.ready)
	<-got
}
