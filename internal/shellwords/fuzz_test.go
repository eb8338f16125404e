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

// FuzzParseEntry: an accepted entry has fixed words, no placeholder among
// them, and no metacharacter; the placeholder is only ever the last word.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{"make lint", "npm test {args}", "{args}", "a {args} b", "a {arg}", "a '{args}'", "a {args", "a;b {args}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fixed, args, err := ParseEntry(s)
		if err != nil {
			return
		}
		if len(fixed) == 0 || HasMeta(s) {
			t.Fatalf("ParseEntry(%q) = %q, %v", s, fixed, args)
		}
		for _, w := range fixed {
			if w == ArgsPlaceholder {
				t.Fatalf("ParseEntry(%q): placeholder among the fixed words %q", s, fixed)
			}
		}
		if words, _ := Split(s); args != (words[len(words)-1] == ArgsPlaceholder) {
			t.Fatalf("ParseEntry(%q): args=%v", s, args)
		}
	})
}

// FuzzPlainWord: a word PlainWordReason admits is never an option, an
// assignment, an absolute or home path, a parent reference, and has only
// the documented characters.
func FuzzPlainWord(f *testing.F) {
	for _, s := range []string{"lint", "SHELL=/bin/cat", "-f", "+x", "../x", "/etc", "~", "a/../b", "src/pkg", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, w string) {
		if PlainWordReason(w) != "" {
			return
		}
		if w == "" || strings.ContainsAny(w[:1], "-+/~") || strings.ContainsAny(w, "=~ '\"*?[]{}$\\`;|&<>") {
			t.Fatalf("%q is plain", w)
		}
		for _, c := range strings.Split(w, "/") {
			if c == ".." {
				t.Fatalf("%q with '..' is plain", w)
			}
		}
		for _, r := range w {
			if r >= 0x80 || r < 0x20 {
				t.Fatalf("%q with %U is plain", w, r)
			}
		}
	})
}
