package visible

import (
	"io"
	"unicode/utf8"
)

// Writer passes a stream of sandbox text to w under the rule of Text,
// whatever pieces it arrives in: a UTF-8 sequence cut between two writes
// is held back until it is complete (or shown as \xNN bytes once it cannot
// be), and the combining-mark state carries over. Flush writes what is
// held back; call it when the stream ends.
type Writer struct {
	w       io.Writer
	e       escaper
	pending []byte // the start of a UTF-8 sequence cut by the last write
	out     []byte
}

// NewWriter returns a Writer that shows text as Text does.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, e: escaper{form: AngleForm, keepNewline: true, keepTab: true}}
}

// Write implements io.Writer; it reports len(p) once the escaped text is
// written.
func (x *Writer) Write(p []byte) (int, error) {
	n := len(p)
	x.out = x.out[:0]
	if len(x.pending) > 0 {
		// Complete the held-back sequence with the first bytes of p.
		for len(p) > 0 && !utf8.FullRune(x.pending) && len(x.pending) < utf8.UTFMax {
			x.pending = append(x.pending, p[0])
			p = p[1:]
		}
		if !utf8.FullRune(x.pending) {
			return n, nil
		}
		r, size := utf8.DecodeRune(x.pending)
		x.out = x.e.appendRune(x.out, r, size, x.pending[0])
		// Bytes of the held-back sequence beyond the rune go round again.
		p = append(append([]byte{}, x.pending[size:]...), p...)
		x.pending = x.pending[:0]
	}
	cut := len(p)
	for i := max(0, len(p)-utf8.UTFMax+1); i < len(p); i++ {
		if utf8.RuneStart(p[i]) && !utf8.FullRune(p[i:]) {
			cut = i
			break
		}
	}
	x.out = x.e.appendBytes(x.out, p[:cut])
	x.pending = append(x.pending, p[cut:]...)
	if _, err := x.w.Write(x.out); err != nil {
		return 0, err
	}
	return n, nil
}

// Flush shows a sequence still held back as its bytes.
func (x *Writer) Flush() error {
	if len(x.pending) == 0 {
		return nil
	}
	x.out = x.e.appendBytes(x.out[:0], x.pending)
	x.pending = x.pending[:0]
	_, err := x.w.Write(x.out)
	return err
}
