package visible

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, goForm, angle string }{
		{"make lint", "make lint", "make lint"},
		{"\x1b[2J\x1b[Hrm -rf /", `\x1b[2J\x1b[Hrm -rf /`, `\x1b[2J\x1b[Hrm -rf /`},
		{"ls \u202etxt.exe", `ls \u202etxt.exe`, `ls <U+202E>txt.exe`},
		{"a\u200bb", `a\u200bb`, `a<U+200B>b`},
		{"tag\U000E0041", `tag\U000e0041`, `tag<U+E0041>`},
		{`back\slash`, `back\\slash`, `back\\slash`},
		{"nl\nret\rtab\t", `nl\nret\rtab\t`, `nl\nret\rtab\t`},
		{"bad\xffutf8", `bad\xffutf8`, `bad\xffutf8`},
		{"c1\u0085", `c1\u0085`, `c1<U+0085>`},
		{"nbsp\u00a0", `nbsp\u00a0`, `nbsp<U+00A0>`},
		{"ünïcödé 日本", "ünïcödé 日本", "ünïcödé 日本"},
	} {
		if got := Escape(tc.in, GoForm); got != tc.goForm {
			t.Errorf("Escape(%q, GoForm) = %q, want %q", tc.in, got, tc.goForm)
		}
		if got := Escape(tc.in, AngleForm); got != tc.angle {
			t.Errorf("Escape(%q, AngleForm) = %q, want %q", tc.in, got, tc.angle)
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "x", "\x1b[31m", "\u202e", "\xff", `\u202e`, "a\u200db"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, form := range []Form{GoForm, AngleForm} {
			out := Escape(s, form)
			if !utf8.ValidString(out) {
				t.Fatalf("Escape(%q) = %q: invalid UTF-8", s, out)
			}
			for _, r := range out {
				if r < 0x20 || r == 0x7f || Hidden(r) {
					t.Fatalf("Escape(%q) = %q keeps %U", s, out, r)
				}
			}
			if !strings.ContainsAny(s, "\\\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\v\f\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f") && utf8.ValidString(s) && !strings.ContainsFunc(s, Hidden) && !strings.ContainsFunc(s, isMark) && out != s {
				t.Fatalf("Escape changed harmless text %q to %q", s, out)
			}
		}
	})
}
