// Package visible renders text that came from the sandbox so that nothing in
// it can act on the terminal that shows it: control characters, bidi
// overrides, zero-width and other invisible characters become escapes. The
// approval prompt, the audit trail display and the review commands (log,
// diff, status) all use it, so every piece of agent text reaches the user's
// terminal under the same rule.
package visible

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Form is how a hidden code point (see Hidden) is written.
type Form int

const (
	// GoForm writes \u202e (\U000e0041 above the BMP), as in Go and JSON.
	GoForm Form = iota
	// AngleForm writes <U+202E>, which no shell or JSON syntax shares, for
	// the approval prompt and the review commands.
	AngleForm
)

// maxMarks is how many combining marks in a row are shown as they are
// after one base character: enough for any script's clusters (Hebrew with
// cantillation, Vietnamese, Tibetan stacks), too few for a tower of marks
// that paints over the lines above and below it.
const maxMarks = 4

// Escape returns s with every C0 and C1 control, DEL, invalid UTF-8 byte
// (\xNN; \n, \r, \t by name) and hidden code point escaped, and the
// backslash itself doubled so an escape shown can never be confused with
// text typed to look like one. Combining marks without a base character or
// beyond the fourth in a row are escaped too.
func Escape(s string, form Form) string {
	if !needsEscape(s) {
		return s
	}
	e := escaper{form: form, doubleBackslash: true}
	return string(e.appendString(make([]byte, 0, len(s)+16), s))
}

// Text renders multi-line sandbox text for review output (commit
// messages, file contents in a diff, git's messages about agent content):
// the rule of Escape in AngleForm, except that newline and tab pass as
// they are (they lay text out but hide nothing) and a backslash is not
// doubled (source code is full of them, and a file that holds the text
// `\x1b` shows what it would print anyway).
func Text(s string) string {
	e := escaper{form: AngleForm, keepNewline: true, keepTab: true}
	return string(e.appendString(make([]byte, 0, len(s)+16), s))
}

// Line is Text with newline and tab escaped as well: one field of a table,
// one line of a message.
func Line(s string) string {
	e := escaper{form: AngleForm}
	return string(e.appendString(make([]byte, 0, len(s)+16), s))
}

// AppendText appends Text(string(p)) to dst.
func AppendText(dst, p []byte) []byte {
	e := escaper{form: AngleForm, keepNewline: true, keepTab: true}
	return e.appendBytes(dst, p)
}

func needsEscape(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\\' || r == utf8.RuneError || Hidden(r) || isMark(r) {
			return true
		}
	}
	return false
}

// escaper holds the rule's options and the little state a combining mark
// needs: whether the last character shown can carry marks, and how many
// it already carries.
type escaper struct {
	form            Form
	keepNewline     bool
	keepTab         bool
	doubleBackslash bool

	base  bool // the last rune written is a base character
	marks int  // combining marks written after it
}

func (e *escaper) appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		dst = e.appendRune(dst, r, size, s[i])
		i += size
	}
	return dst
}

func (e *escaper) appendBytes(dst, p []byte) []byte {
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		dst = e.appendRune(dst, r, size, p[i])
		i += size
	}
	return dst
}

// appendRune appends r (size bytes of input starting with first) shown
// under the rule.
func (e *escaper) appendRune(dst []byte, r rune, size int, first byte) []byte {
	wasBase := e.base
	e.base = false
	switch {
	case r == utf8.RuneError && size <= 1:
		return fmt.Appendf(dst, `\x%02x`, first)
	case r == '\n' && e.keepNewline, r == '\t' && e.keepTab:
		return append(dst, byte(r))
	case r == '\n':
		return append(dst, `\n`...)
	case r == '\r':
		return append(dst, `\r`...)
	case r == '\t':
		return append(dst, `\t`...)
	case r < 0x20 || r == 0x7f:
		return fmt.Appendf(dst, `\x%02x`, r)
	case Hidden(r):
		return e.appendHidden(dst, r)
	case isMark(r):
		if !wasBase || e.marks >= maxMarks {
			return e.appendHidden(dst, r)
		}
		e.base = true
		e.marks++
		return utf8.AppendRune(dst, r)
	}
	e.base, e.marks = r != ' ', 0
	if r == '\\' && e.doubleBackslash {
		return append(dst, `\\`...)
	}
	return utf8.AppendRune(dst, r)
}

func (e *escaper) appendHidden(dst []byte, r rune) []byte {
	switch {
	case e.form == AngleForm:
		return fmt.Appendf(dst, "<U+%04X>", r)
	case r <= 0xffff:
		return fmt.Appendf(dst, `\u%04x`, r)
	}
	return fmt.Appendf(dst, `\U%08x`, r)
}

// isMark reports a nonspacing combining mark: it draws over the character
// before it, so it is shown only where it has one (see maxMarks).
func isMark(r rune) bool { return r >= 0x300 && unicode.Is(unicode.Mn, r) }

// Hidden reports code points above ASCII that render as nothing or change
// how the text around them renders: C1 controls, format characters (bidi
// embeddings, overrides and isolates, zero-width spaces and joiners, soft
// hyphen, BOM, tag characters), variation selectors, line and paragraph
// separators, every space but ' ', blank-rendering fillers (Hangul fillers,
// the blank Braille pattern), combining marks that strike through or
// enclose what they follow, private-use, surrogate and unassigned or
// non-printing code points.
func Hidden(r rune) bool {
	if r < 0x80 {
		return false
	}
	switch {
	case r <= 0x9f:
		return true
	case r == 0x00ad, r == 0x034f, r == 0x061c, r == 0x115f, r == 0x1160, r == 0x17b4, r == 0x17b5,
		r == 0x180e, r == 0x2800, r == 0x3164, r == 0xffa0, r == 0xfeff:
		return true
	case r >= 0x2000 && r <= 0x200f, r >= 0x2028 && r <= 0x202f, r >= 0x205f && r <= 0x206f:
		return true
	case r >= 0xfe00 && r <= 0xfe0f, r >= 0xfff9 && r <= 0xfffb, r >= 0xe0000 && r <= 0xe007f:
		return true
	case overlayMark(r):
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zs, unicode.Zl, unicode.Zp, unicode.Me, unicode.Variation_Selector) ||
		!unicode.IsPrint(r)
}

// overlayMark reports the combining marks of canonical combining class 1
// (Overlay): they strike through the character they follow (U+0336 makes
// "curl" look deleted), so they are shown as escapes.
func overlayMark(r rune) bool {
	switch {
	case r >= 0x0334 && r <= 0x0338, r == 0x20d2, r == 0x20d3, r >= 0x20d8 && r <= 0x20da,
		r == 0x20e5, r == 0x20e6, r == 0x20ea, r == 0x20eb, r == 0x10a39,
		r >= 0x16af0 && r <= 0x16af4, r == 0x1bc9e, r >= 0x1d167 && r <= 0x1d169:
		return true
	}
	return false
}
