package prompt

import (
	"bytes"
	"io"
	"os"
	"time"
)

// escTimeout is how long a lone ESC waits for the rest of a sequence (the
// terminal sends a key's sequence in one write; bubbletea waits as long).
const escTimeout = 50 * time.Millisecond

// Token states of gatedInput.
const (
	stGround = iota
	stKey    // a one-byte key
	stEsc    // ESC read
	stAlt    // ESC c: Alt+c
	stCSI    // ESC [
	stSS3    // ESC O
	stString // ESC ] / P / _ / ^ / X: a terminal's string reply
	stUTF8   // inside a multi-byte character
)

// Bounds of a sequence held while it is classified.
const (
	maxCSI    = 64
	maxString = 4096
)

// gatedInput is a prompt's view of the terminal input: a key counts from
// the moment its first byte arrives (the read that returned it), so the
// gate is asked then, not when the prompt gets round to the key. Every key
// that starts while the gate is closed is dropped and counted (whole:
// escape sequences, UTF-8 characters and bracketed pastes are cut at their
// ends, never in the middle, so a dropped arrow key cannot leave an "A"
// behind). The terminal's replies to the renderer's queries (CSI ? … and
// the string sequences) are not keys: they pass and are not counted. Keys
// that start while the gate is open pass byte for byte, at once.
type gatedInput struct {
	src    io.Reader
	g      *ReadGate
	onDrop func() // told after keys were dropped (may be nil)
	// paging lets the escalation prompt's paging keys pass while closed.
	paging bool

	state   int
	open    bool   // the current token started while the gate was open
	tok     []byte // the current token's bytes
	need    int    // UTF-8 continuation bytes still expected
	escAt   time.Time
	inPaste bool // inside a bracketed paste whose start was dropped
	pasteAt time.Time
	out     []byte // bytes to pass on
	buf     []byte
}

// newGatedInput wraps src; a terminal stays a terminal (bubbletea puts an
// *os.File in raw mode and cancels its reads). paging: see scrollKeys.
func newGatedInput(src io.Reader, g *ReadGate, onDrop func(), paging bool) io.Reader {
	gi := &gatedInput{src: src, g: g, onDrop: onDrop, paging: paging}
	if f, ok := src.(*os.File); ok {
		return gatedFile{f, gi}
	}
	return gi
}

// gatedFile is gatedInput over a terminal file.
type gatedFile struct {
	*os.File
	gi *gatedInput
}

func (f gatedFile) Read(p []byte) (int, error) { return f.gi.Read(p) }

// Read implements io.Reader.
func (gi *gatedInput) Read(p []byte) (int, error) {
	for len(gi.out) == 0 {
		if cap(gi.buf) < len(p) {
			gi.buf = make([]byte, max(len(p), 256))
		}
		n, err := gi.src.Read(gi.buf[:len(p)])
		if n > 0 {
			t := gi.g.Now()
			dropped := gi.feed(gi.buf[:n], t, gi.g.OpenAt(t))
			if dropped > 0 {
				gi.g.drop(dropped)
				if gi.onDrop != nil {
					gi.onDrop()
				}
			}
		}
		if err != nil {
			if len(gi.out) > 0 {
				break
			}
			return 0, err
		}
	}
	n := copy(p, gi.out)
	gi.out = gi.out[n:]
	return n, nil
}

// feed runs the bytes of one read (arrived at t, gate open or not)
// through the tokenizer; it returns the number of keys dropped.
func (gi *gatedInput) feed(b []byte, t time.Time, open bool) int {
	dropped := 0
	if gi.state == stEsc && t.Sub(gi.escAt) > escTimeout {
		dropped += gi.finish() // a lone ESC (the Escape key)
	}
	if gi.inPaste && t.Sub(gi.pasteAt) > time.Second {
		gi.inPaste = false // a paste whose end never came
	}
	for _, c := range b {
		if gi.state != stGround && !gi.continues(c) {
			dropped += gi.finish() // the token ended before c
		}
		if gi.state == stGround {
			gi.begin(c, t, open)
		}
		gi.push(c)
		if gi.done(c) {
			dropped += gi.finish()
		}
	}
	if gi.inPaste {
		gi.pasteAt = t
	}
	return dropped
}

// begin starts a token with c; inside a dropped paste every token is
// closed.
func (gi *gatedInput) begin(c byte, t time.Time, open bool) {
	gi.open, gi.tok, gi.need = open && !gi.inPaste, gi.tok[:0], 0
	switch {
	case c == 0x1b:
		gi.state, gi.escAt = stEsc, t
	case c >= 0xc0 && c < 0xf8:
		gi.state, gi.need = stUTF8, 1
		if c >= 0xe0 {
			gi.need++
		}
		if c >= 0xf0 {
			gi.need++
		}
	default:
		gi.state = stKey
	}
}

// continues reports whether c belongs to the current token.
func (gi *gatedInput) continues(c byte) bool {
	switch gi.state {
	case stEsc:
		return c != 0x1b // ESC ESC: the first one is a key of its own
	case stUTF8:
		return c&0xc0 == 0x80
	case stCSI, stSS3, stString:
		return true
	}
	return false
}

// push adds c to the current token (and passes it at once if the token
// started open).
func (gi *gatedInput) push(c byte) {
	gi.tok = append(gi.tok, c)
	if gi.open {
		gi.out = append(gi.out, c)
	}
	switch {
	case gi.state == stEsc && len(gi.tok) == 2:
		switch c {
		case '[':
			gi.state = stCSI
		case 'O':
			gi.state = stSS3
		case ']', 'P', '_', '^', 'X':
			gi.state = stString
		default:
			gi.state = stAlt
		}
	case gi.state == stUTF8 && len(gi.tok) > 1:
		gi.need--
	}
}

// done reports whether the current token ends with c.
func (gi *gatedInput) done(c byte) bool {
	n := len(gi.tok)
	switch gi.state {
	case stKey, stAlt:
		return true
	case stCSI:
		return (n > 2 && c >= 0x40 && c <= 0x7e) || n >= maxCSI
	case stSS3:
		return n == 3
	case stString:
		return c == 0x07 || (c == '\\' && gi.tok[n-2] == 0x1b) || n >= maxString
	case stUTF8:
		return gi.need == 0
	}
	return false
}

// finish ends the current token: a closed one passes if it is a terminal
// reply, else it is dropped (1 key; a bracketed paste counts once). It
// returns the keys dropped.
func (gi *gatedInput) finish() int {
	tok, open := gi.tok, gi.open
	gi.state, gi.tok = stGround, gi.tok[:0]
	if open || len(tok) == 0 {
		return 0
	}
	switch {
	case isReply(tok) || gi.paging && !gi.inPaste && scrollKeys[string(tok)]:
		gi.out = append(gi.out, tok...)
		return 0
	case bytes.Equal(tok, []byte("\x1b[200~")):
		gi.inPaste = true
		return 1
	case bytes.Equal(tok, []byte("\x1b[201~")):
		gi.inPaste = false
		return 0
	case gi.inPaste:
		return 0
	}
	return 1
}

// scrollKeys are the sequences of the escalation prompt's paging keys
// (Model.scroll): for that prompt they pass while the gate is closed,
// since they only show more (and what they show closes the gate again);
// the model still drops them as keys in the editor. Other prompts have
// no paging: there they are dropped like any key.
var scrollKeys = map[string]bool{
	"j": true, "k": true, " ": true, "f": true, "b": true, "g": true, "G": true,
	"\x1b[A": true, "\x1b[B": true, "\x1bOA": true, "\x1bOB": true, // up, down
	"\x1b[5~": true, "\x1b[6~": true, // PgUp, PgDn
	"\x1b[H": true, "\x1b[F": true, "\x1bOH": true, "\x1bOF": true, // Home, End
	"\x1b[1~": true, "\x1b[4~": true, "\x1b[7~": true, "\x1b[8~": true,
}

// isReply reports whether a complete sequence is a terminal's reply to a
// query (DEC private CSI ? …, or a string sequence), not a key.
func isReply(tok []byte) bool {
	if len(tok) < 3 || tok[0] != 0x1b {
		return false
	}
	switch tok[1] {
	case '[':
		return tok[2] == '?'
	case ']', 'P', '_', '^', 'X':
		return true
	}
	return false
}
