package shellwords

import (
	"strings"
	"testing"
)

// FuzzSplitMeta: Split never panics; a string without metacharacters yields
// words without metacharacters (quoting cannot smuggle one in), and no
// word of a successful split contains a NUL.
func FuzzSplitMeta(f *testing.F) {
	for _, s := range []string{"make lint", `a "b c" 'd'`, "a\\ b", "a;b", "$(x)", "a\nb", "\x1b[2J", "'", `"`, "a\u202eb", "x=1 y", "{a,b}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv, err := Split(s)
		if err != nil {
			return
		}
		if len(argv) == 0 {
			t.Fatalf("%q: empty argv without error", s)
		}
		for _, a := range argv {
			if strings.ContainsRune(a, 0) {
				t.Fatalf("%q: NUL in word", s)
			}
			if !HasMeta(s) && HasMeta(a) {
				t.Fatalf("%q: word %q has a metacharacter the string did not", s, a)
			}
		}
	})
}

// FuzzHasMeta: every control character and every listed metacharacter is
// detected wherever it appears.
func FuzzHasMeta(f *testing.F) {
	f.Add("make lint", byte(';'), 3)
	f.Fuzz(func(t *testing.T, s string, c byte, at int) {
		if !(c < 0x20 || c == 0x7f || strings.IndexByte(metaChars, c) >= 0) {
			return
		}
		if at < 0 {
			at = -at
		}
		at %= len(s) + 1
		if in := s[:at] + string(c) + s[at:]; !HasMeta(in) {
			t.Fatalf("HasMeta(%q) = false", in)
		}
	})
}
