package kubecli

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/session"
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
// paths, the pid file only without a terminal; without escalation the
// old wrapper.
func TestSessionCommand(t *testing.T) {
	e := &escSession{dir: "/run/lazaret/kube/S"}
	got := strings.Join(sessionCommand(e, []string{"make"}, "/tmp/p", false), " ")
	want := "/lazaret/lazaret-escalate __session --stdin --path-append /lazaret --env LAZARET_ESCALATE_FALLBACK=/lazaret/lazaret-escalate-go --env LAZARET_ESCALATE_SOCKET=/run/lazaret/kube/S/sock --env LAZARET_TLS_DIR=/run/lazaret/kube/S/tls --pidfile /tmp/p -- make"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := strings.Join(sessionCommand(e, []string{"bash"}, "/tmp/p", true), " "); strings.Contains(got, "--pidfile") {
		t.Fatalf("with a terminal: %s", got)
	}
	if got := sessionCommand(nil, []string{"make"}, "/tmp/p", true); len(got) != 1 {
		t.Fatalf("without escalation, with a terminal: %q", got)
	}
}
