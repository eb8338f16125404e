package visible

import (
	"fmt"
	"unicode/utf8"
)

// JSON rewrites the hidden characters (bidi controls, zero-width and other
// format characters, C1 controls) that encoding/json leaves raw as \u
// escapes. The result is the same JSON value, but printing it on a
// terminal cannot reorder or hide text. b must be valid JSON, where such
// characters can only occur inside strings (encoding/json already escapes
// the C0 controls there).
func JSON(b []byte) []byte {
	clean := true
	for _, r := range string(b) {
		if r >= 0x80 && Hidden(r) {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r >= 0x80 && Hidden(r) && !(r == utf8.RuneError && size == 1) {
			if r > 0xffff {
				r -= 0x10000
				out = fmt.Appendf(out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}
