package prompt

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible renders s so that every byte that could change what the human
// sees is shown as an escape instead of acting: C0 and C1 controls and DEL
// as \xNN (\n, \r, \t by name), bidi controls, zero-width and other format
// characters, unassigned or non-printing code points as <U+XXXX>, invalid
// UTF-8 as \xNN, and the backslash itself as \\ so an escape shown can
// never be confused with text typed to look like one.
func Visible(s string) string {
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
		case r >= 0x80 && r < 0xa0, special(r), !unicode.IsPrint(r):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// special are printable-looking code points that reorder, hide or join
// text: bidi embeddings, overrides and isolates, marks, zero-width spaces
// and joiners, soft hyphen, BOM, and every other format character (Cf).
func special(r rune) bool {
	switch r {
	case 0x00ad, 0x034f, 0x061c, 0x115f, 0x1160, 0x17b4, 0x17b5, 0x180e, 0x3164, 0xffa0, 0xfeff:
		return true
	}
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) ||
		(r >= 0x2000 && r <= 0x200f) || (r >= 0x2028 && r <= 0x202f) || (r >= 0x205f && r <= 0x206f) ||
		(r >= 0xfe00 && r <= 0xfe0f) || (r >= 0xe0000 && r <= 0xe007f)
}
