package keeper

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/x/vt"
)

// screen is the keeper's copy of the session's terminal: everything the
// session writes goes through it, so that an attach can redraw what a
// terminal attached all along would show.
type screen struct {
	emu *vt.Emulator
	// rang: the agent rang the bell or printed an OSC 9/777 notification
	// in the write under way.
	rang bool
}

// Only the screen is redrawn, never the scrollback: one line is the
// emulator's minimum, and it keeps the keeper's memory flat.
const scrollbackLines = 1

// newScreen makes the copy at size s. The emulator answers device
// queries (ESC[6n, ESC[c…) into a pipe of its own that only its Read
// empties: drained here and dropped, or the first such query from the
// agent would block every later write, and the keeper with it. The real
// terminal, when one is attached, answers them itself.
func newScreen(s Size) *screen {
	sc := &screen{emu: vt.NewEmulator(int(s.Cols), int(s.Rows))}
	sc.emu.SetScrollbackSize(scrollbackLines)
	sc.emu.SetCallbacks(vt.Callbacks{Bell: func() { sc.rang = true }})
	for _, cmd := range []int{9, 777} {
		// Desktop notifications (iTerm2's OSC 9, rxvt's OSC 777): the
		// agent's text is dropped, only the wish for attention counts.
		sc.emu.RegisterOscHandler(cmd, func([]byte) bool { sc.rang = true; return true })
	}
	go func() { _, _ = io.Copy(io.Discard, sc.emu) }()
	return sc
}

// write feeds p to the copy and reports whether the agent asked for
// attention in it.
func (s *screen) write(p []byte) bool {
	s.rang = false
	_, _ = s.emu.Write(p)
	return s.rang
}

// resize changes the copy's size.
func (s *screen) resize(sz Size) { s.emu.Resize(int(sz.Cols), int(sz.Rows)) }

// close ends the drain: the answers' pipe closes (Emulator.Close would
// race with the drain's Read on the emulator's own closed flag).
func (s *screen) close() {
	if c, ok := s.emu.InputPipe().(io.Closer); ok {
		_ = c.Close()
	}
}

// text is the screen's plain text (what a --detach start that failed
// shows of its session's output).
func (s *screen) text() string { return s.emu.String() }

// redraw is what a terminal that attaches is sent first: the alternate
// screen entered or left as the session's is, cleared, each line at its
// row, the cursor where the session's is and as visible.
func (s *screen) redraw() []byte {
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
