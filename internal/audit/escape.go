package audit

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes every control, bidi, invisible and format character of s
// visible as a Go-style escape (\x1b, \u202e, \n), and escapes the
// backslash itself so that an escape in the output is never ambiguous. Audit
// content comes from the sandbox: shown raw, it could move the cursor,
// recolour or reorder what the user reads.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
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
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case hidden(r):
			if r <= 0xffff {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
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
		if r < 0x20 || r == 0x7f || r == '\\' || r == utf8.RuneError || hidden(r) {
			return true
		}
	}
	return false
}

// hidden reports characters that render as nothing or change how the
// surrounding text renders: C1 controls, format characters (bidi
// overrides and isolates, zero-width joiners, BOM, tag characters), line
// and paragraph separators, unusual spaces, and private-use code points.
func hidden(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0: // Hangul fillers render blank
		return true
	case r >= 0xfff9 && r <= 0xfffb: // interlinear annotation
		return true
	case r != ' ' && unicode.Is(unicode.Zs, r): // no-break and odd-width spaces
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs, unicode.Variation_Selector) || !unicode.IsPrint(r) && !unicode.IsSpace(r) && r > 0x7f
}

// EscapeArgv escapes each word and joins them with spaces, quoting words
// that are empty or contain a space so the word boundaries stay visible.
func EscapeArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, w := range argv {
		w = Escape(w)
		if w == "" || strings.ContainsAny(w, " '\"") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		parts[i] = w
	}
	return strings.Join(parts, " ")
}
