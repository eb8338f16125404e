// Package visible renders text that came from the sandbox so that nothing in
// it can act on the terminal that shows it: control characters, bidi
// overrides, zero-width and other invisible characters become escapes. The
// approval prompt and the audit trail display both use it, so what the human
// approves and what the audit shows are escaped by the same rules.
package visible

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Form is how a hidden code point (see Hidden) is written.
type Form int

const (
	// GoForm writes \u202e (\U000e0041 above the BMP), as in Go and JSON.
	GoForm Form = iota
	// AngleForm writes <U+202E>, which no shell or JSON syntax shares, for
	// the approval prompt.
	AngleForm
)

// Escape returns s with every C0 and C1 control, DEL, invalid UTF-8 byte
// (\xNN; \n, \r, \t by name) and hidden code point escaped, and the
// backslash itself doubled so an escape shown can never be confused with
// text typed to look like one.
func Escape(s string, form Form) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
			i++
			continue
		}
		i += size
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case Hidden(r):
			switch {
			case form == AngleForm:
				fmt.Fprintf(&b, "<U+%04X>", r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsEscape(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\\' || r == utf8.RuneError || Hidden(r) {
			return true
		}
	}
	return false
}

// Hidden reports code points above ASCII that render as nothing or change
// how the text around them renders: C1 controls, format characters (bidi
// embeddings, overrides and isolates, zero-width spaces and joiners, soft
// hyphen, BOM, tag characters), variation selectors, line and paragraph
// separators, every space but ' ', blank-rendering fillers, private-use,
// surrogate and unassigned or non-printing code points.
func Hidden(r rune) bool {
	if r < 0x80 {
		return false
	}
	switch {
	case r <= 0x9f:
		return true
	case r == 0x00ad, r == 0x034f, r == 0x061c, r == 0x115f, r == 0x1160, r == 0x17b4, r == 0x17b5,
		r == 0x180e, r == 0x3164, r == 0xffa0, r == 0xfeff:
		return true
	case r >= 0x2000 && r <= 0x200f, r >= 0x2028 && r <= 0x202f, r >= 0x205f && r <= 0x206f:
		return true
	case r >= 0xfe00 && r <= 0xfe0f, r >= 0xfff9 && r <= 0xfffb, r >= 0xe0000 && r <= 0xe007f:
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zs, unicode.Zl, unicode.Zp, unicode.Variation_Selector) ||
		!unicode.IsPrint(r)
}
