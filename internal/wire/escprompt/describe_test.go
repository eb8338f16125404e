package escprompt

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/visible"
)

// FuzzDescribe: whatever the agent puts in a request, its rendering for
// `lazaret approvals` holds no control, bidi or invisible character (a
// line break only between the renderer's own lines), and its summary is
// one line.
func FuzzDescribe(f *testing.F) {
	f.Add("touch", "x\x1b[2J", "why\u202eevil", "/workspace\n")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, a0, a1, just, cwd string) {
		r := PromptRequest{RequestID: "r", Argv: []string{a0, a1}, Executable: a0, Justification: just, Cwd: cwd,
			SessionID: "0123456789abcdef", SessionCommand: []string{a1}}
		for _, rr := range []PromptRequest{r, {Command: a1 + just}} {
			d, s := Describe(rr), Summary(rr)
			if strings.Contains(s, "\n") {
				t.Fatalf("summary on more than one line: %q", s)
			}
			if len(strings.Split(d, "\n")) != strings.Count(d, "\n")+1 || !utf8.ValidString(d) {
				t.Fatalf("invalid rendering %q", d)
			}
			for _, c := range d + s {
				if (c < 0x20 && c != '\n') || c == 0x7f || (c >= 0x80 && c < 0xa0) || visible.Hidden(c) {
					t.Fatalf("raw %U in %q", c, d+s)
				}
			}
		}
	})
}

func TestDescribeLines(t *testing.T) {
	d := Describe(PromptRequest{RequestID: "r1", Justification: "a\nb", Argv: []string{"touch", "f"}, Executable: "/usr/bin/touch"})
	for _, want := range []string{"reason     a\n           b\n", "executable /usr/bin/touch\n", `argv[1]    "f"`} {
		if !strings.Contains(d, want) {
			t.Errorf("lacks %q:\n%s", want, d)
		}
	}
}
