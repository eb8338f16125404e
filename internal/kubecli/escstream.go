package kubecli

import (
	"bytes"
	"io"
	"sync"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
)

// The session's streams while its holder takes the delegation: the
// holder writes session.HolderReady on stdout once it is non-dumpable
// (and its terminal does not echo); only then is the delegation frame
// written to its stdin, ahead of anything the user types. The marker is
// taken out of the user's output.

// streams returns the session's stdin and stdout around in and out.
func (e *escSession) streams(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	if e == nil {
		return in, out
	}
	if e.resumed {
		// The holder took its delegation at the start; its marker, at the
		// start of the output the pod's keeper replays, is still taken out.
		return in, &markerStrip{w: out, ready: make(chan struct{})}
	}
	gate := &gatedFrame{ready: e.ready, frame: e.frame}
	e.frame = nil
	var r io.Reader = gate
	if in != nil {
		r = io.MultiReader(gate, in)
	}
	return r, &markerStrip{w: out, ready: e.ready}
}

// gatedFrame yields the frame once ready is closed, then EOF.
type gatedFrame struct {
	ready <-chan struct{}
	frame []byte
}

func (g *gatedFrame) Read(p []byte) (int, error) {
	<-g.ready
	if len(g.frame) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.frame)
	clear(g.frame[:n])
	g.frame = g.frame[n:]
	return n, nil
}

// markerStrip passes out through, except the holder's marker at the very
// start of the stream, which it removes and reports by closing ready.
// Anything else first (an older holder, an error) passes unchanged and
// the frame is never sent.
type markerStrip struct {
	w     io.Writer
	ready chan struct{}
	mu    sync.Mutex
	buf   []byte
	done  bool
}

func (m *markerStrip) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return m.w.Write(p)
	}
	m.buf = append(m.buf, p...)
	marker := []byte(session.HolderReady)
	if len(m.buf) < len(marker) && bytes.HasPrefix(marker, m.buf) {
		return len(p), nil
	}
	m.done = true
	rest := m.buf
	m.buf = nil
	if bytes.HasPrefix(rest, marker) {
		close(m.ready)
		rest = rest[len(marker):]
	}
	if len(rest) > 0 {
		if _, err := m.w.Write(rest); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// sessionCommand is what the session's exec runs: without a terminal
// the command records its pid in pidFile first (signals must be delivered
// in the sandbox: the exec stream carries none) and is started by the
// image's sh, as before Host Escalation (so its lookup is unchanged); all
// of it under the holder when escalation is on.
func sessionCommand(e *escSession, command []string, pidFile string, tty bool) []string {
	if !tty {
		command = append([]string{"/bin/sh", "-c", `echo $$ 2>/dev/null >"$0"; exec "$@"`, pidFile}, command...)
	}
	if e != nil {
		return e.wrap(command)
	}
	return command
}
