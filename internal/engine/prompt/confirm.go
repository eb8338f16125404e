package prompt

import (
	"errors"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// GateInput wraps in (the terminal, or the attach gate's reader) for a
// prompt that writes its own text and answers on single keys or lines:
// every key whose first byte arrives while g is closed is dropped and
// counted; onDrop (may be nil) is called after keys were dropped. The
// prompt calls g.Drawn once its text is written.
func GateInput(in io.Reader, g *ReadGate, onDrop func()) io.Reader {
	return newGatedInput(in, g, onDrop, false)
}

// Notice writes IgnoredNotice once, on the first dropped key, until
// Close; it is the onDrop of GateInput for prompts that write lines.
type Notice struct {
	mu     sync.Mutex
	w      io.Writer
	after  string // written after the notice (the question again)
	shown  bool
	closed bool
}

// NewNotice returns the notice writer for w (a raw terminal: lines end in
// "\r\n"); after is written below it.
func NewNotice(w io.Writer, after string) *Notice { return &Notice{w: w, after: after} }

// Dropped writes the notice the first time.
func (n *Notice) Dropped() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.shown || n.closed {
		return
	}
	n.shown = true
	_, _ = io.WriteString(n.w, "\r\nlazaret: "+IgnoredNotice+"\r\n"+n.after)
}

// Close stops the notice (the prompt is over).
func (n *Notice) Close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
}

// ErrNotTerminal is Confirm's answer without a terminal.
var ErrNotTerminal = errors.New("not a terminal")

// Confirm asks question on the terminal in (written to out, which the user
// sees) and reports whether the answer was y or yes. It is the one way
// lazaret asks for a confirmation (state reset; any later one): pending
// input is flushed, the terminal is read key by key (raw mode, so a key
// counts when it is typed, not when Enter sends the line), and every key
// typed before the question was readable (the readability gate,
// MinReadable) is dropped, with the notice. Ctrl-C and Ctrl-D answer no.
func Confirm(in *os.File, out io.Writer, question string) (bool, error) {
	return confirm(in, out, question, NewReadGate(-1, nil))
}

func confirm(in *os.File, out io.Writer, question string, g *ReadGate) (bool, error) {
	if in == nil || !term.IsTerminal(int(in.Fd())) {
		return false, ErrNotTerminal
	}
	old, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return false, err
	}
	defer func() { _ = term.Restore(int(in.Fd()), old) }()
	_ = FlushInput(in)
	notice := NewNotice(out, question)
	defer notice.Close()
	keys := GateInput(in, g, notice.Dropped)
	if _, err := io.WriteString(out, question); err != nil {
		return false, err
	}
	g.Drawn()
	line, err := readLine(keys, out, g)
	_, _ = io.WriteString(out, "\r\n")
	if err != nil {
		return false, err
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

// readLine reads an answer line from gated keys, echoing it; Ctrl-C and
// Ctrl-D end it empty. A key the gate let through but that is
// handled only once the gate closed again is dropped too.
func readLine(keys io.Reader, echo io.Writer, g *ReadGate) (string, error) {
	var line []byte
	b := make([]byte, 1)
	for {
		if _, err := keys.Read(b); err != nil {
			return "", err
		}
		if !g.OpenAt(g.Now()) {
			continue
		}
		switch c := b[0]; {
		case c == '\r' || c == '\n':
			return string(line), nil
		case c == 0x03 || c == 0x04:
			return "", nil
		case c == 0x7f || c == 0x08:
			if len(line) > 0 {
				line = line[:len(line)-1]
				_, _ = io.WriteString(echo, "\b \b")
			}
		case c >= 0x20 && c < 0x7f && len(line) < 16:
			line = append(line, c)
			_, _ = echo.Write([]byte{c})
		}
	}
}
