package keeper

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/charmbracelet/x/vt"
)

// screen is the keeper's copy of the session's terminal: everything the
// session writes goes through it, so that an attach can redraw what a
// terminal attached all along would show.
//
// The emulator scrolls slowly (about 2 MB/s of text here: each line
// scrolled moves the whole screen), so it is fed off the output path:
// write only queues, a goroutine of its own feeds the emulator, and the
// attached terminal gets the output at the PTY's pace. Behind by more
// than maxBacklog, the oldest output is dropped and the copy restarts
// from a reset on the newest, which is what the screen shows after a
// flood of text anyway.
type screen struct {
	// emuMu is held while the emulator is fed or read; taking the
	// backlog under it keeps the output's order.
	emuMu sync.Mutex
	emu   *vt.Emulator
	// rang: the agent rang the bell or printed an OSC 9/777 notification
	// in the write being fed.
	rang bool

	mu      sync.Mutex
	backlog []byte
	lost    bool
	closed  bool
	wake    chan struct{}
	// onRing is called (from the feeder) when the agent asked for
	// attention.
	onRing func()
}

// Only the screen is redrawn, never the scrollback: one line is the
// emulator's minimum, and it keeps the keeper's memory flat.
const scrollbackLines = 1

// maxBacklog bounds the output not yet in the copy, keepTail is what is
// kept of it when that bound is passed (many screens' worth).
const (
	maxBacklog = 512 << 10
	keepTail   = 64 << 10
)

// newScreen makes the copy at size s. The emulator answers device
// queries (ESC[6n, ESC[c…) into a pipe of its own that only its Read
// empties: drained here and dropped, or the first such query from the
// agent would block every later write, and the keeper with it. The real
// terminal, when one is attached, answers them itself.
func newScreen(s Size, onRing func()) *screen {
	sc := &screen{emu: vt.NewEmulator(int(s.Cols), int(s.Rows)), wake: make(chan struct{}, 1), onRing: onRing}
	sc.emu.SetScrollbackSize(scrollbackLines)
	sc.emu.SetCallbacks(vt.Callbacks{Bell: func() { sc.rang = true }})
	for _, cmd := range []int{9, 777} {
		// Desktop notifications (iTerm2's OSC 9, rxvt's OSC 777): the
		// agent's text is dropped, only the wish for attention counts.
		sc.emu.RegisterOscHandler(cmd, func([]byte) bool { sc.rang = true; return true })
	}
	go func() { _, _ = io.Copy(io.Discard, sc.emu) }()
	go sc.feeder()
	return sc
}

// write queues p for the copy; it never waits for the emulator.
func (s *screen) write(p []byte) {
	s.mu.Lock()
	s.backlog = append(s.backlog, p...)
	if len(s.backlog) > maxBacklog {
		tail := s.backlog[len(s.backlog)-keepTail:]
		// From a line's start, so the copy does not begin inside one.
		if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		s.backlog = append(make([]byte, 0, keepTail), tail...)
		s.lost = true
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// feeder feeds the emulator whatever was written, until close.
func (s *screen) feeder() {
	for range s.wake {
		if s.sync() && s.onRing != nil {
			s.onRing()
		}
	}
}

// sync feeds the backlog into the emulator now and reports whether the
// agent asked for attention in it.
func (s *screen) sync() bool {
	s.emuMu.Lock()
	defer s.emuMu.Unlock()
	s.mu.Lock()
	p, lost := s.backlog, s.lost
	s.backlog, s.lost = nil, false
	s.mu.Unlock()
	if len(p) == 0 {
		return false
	}
	s.rang = false
	if lost {
		_, _ = s.emu.Write([]byte("\x1bc")) // a reset: what it showed is stale
	}
	_, _ = s.emu.Write(p)
	return s.rang
}

// resize changes the copy's size, after what was written before.
func (s *screen) resize(sz Size) {
	s.sync()
	s.emuMu.Lock()
	defer s.emuMu.Unlock()
	s.emu.Resize(int(sz.Cols), int(sz.Rows))
}

// close ends the feeder and the drain: the answers' pipe closes
// (Emulator.Close would race with the drain's Read on the emulator's own
// closed flag).
func (s *screen) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.wake)
	}
	s.mu.Unlock()
	if c, ok := s.emu.InputPipe().(io.Closer); ok {
		_ = c.Close()
	}
}

// text is the screen's plain text (what a --detach start that failed
// shows of its session's output).
func (s *screen) text() string {
	s.sync()
	s.emuMu.Lock()
	defer s.emuMu.Unlock()
	return s.emu.String()
}

// redraw is what a terminal that attaches is sent first: the alternate
// screen entered or left as the session's is, cleared, each line at its
// row, the cursor where the session's is and as visible.
func (s *screen) redraw() []byte {
	s.sync()
	s.emuMu.Lock()
	defer s.emuMu.Unlock()
	var b bytes.Buffer
	if s.emu.IsAltScreen() {
		b.WriteString("\x1b[?1049h")
	} else {
		b.WriteString("\x1b[?1049l")
	}
	b.WriteString("\x1b[0m\x1b[H\x1b[2J")
	for y, line := range strings.Split(s.emu.Render(), "\n") {
		if line == "" {
			continue
		}
		fmt.Fprintf(&b, "\x1b[%d;1H%s\x1b[0m", y+1, line)
	}
	pos := s.emu.CursorPosition()
	fmt.Fprintf(&b, "\x1b[%d;%dH", pos.Y+1, pos.X+1)
	if s.emu.CursorHidden() {
		b.WriteString("\x1b[?25l")
	} else {
		b.WriteString("\x1b[?25h")
	}
	return b.Bytes()
}
