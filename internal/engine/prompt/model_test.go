package prompt

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

func key(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "ctrl+u":
		return tea.KeyPressMsg{Code: 'u', Mod: tea.ModCtrl}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

func typeText(m *Model, s string) {
	for _, r := range s {
		m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

func req(id string, argv ...string) escprompt.PromptRequest {
	return escprompt.PromptRequest{RequestID: id, Profile: "claude", Justification: "because", Cwd: "/workspace",
		HostDir: "/home/u/proj", Argv: argv, Executable: "/usr/bin/" + argv[0], Reason: "no auto_approve entry matches"}
}

func resolver(argv0 string, _ escprompt.PromptRequest) (string, error) {
	if argv0 == "nosuch" {
		return "", errors.New("no such executable")
	}
	return "/usr/bin/" + argv0, nil
}

// newModel is New on a terminal of the classic size, as bubbletea reports
// it before the first key.
func newModel(r escprompt.PromptRequest, resolve Resolver, decide func(Decision)) *Model {
	m := ungated(New(r, resolve, decide))
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	return m
}

// ungated opens m's readability gate for good: the tests of the other
// rules type at once (readgate_test.go tests the gate).
func ungated(m *Model) *Model {
	g := NewReadGate(0, nil)
	g.off = true
	m.SetReadGate(g)
	return m
}

// quits reports whether cmd quits the program.
func quits(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

type recorder struct{ got []Decision }

func (r *recorder) decide(d Decision) { r.got = append(r.got, d) }

func TestApproveDeny(t *testing.T) {
	for _, tc := range []struct {
		k    string
		want escprompt.Action
	}{{"a", escprompt.Approve}, {"A", escprompt.Approve}, {"d", escprompt.Deny}, {"D", escprompt.Deny}} {
		rec := &recorder{}
		m := newModel(req("r1", "make", "test"), resolver, rec.decide)
		_, cmd := m.Update(key(tc.k))
		if len(rec.got) != 1 || rec.got[0].Answer.Action != tc.want || rec.got[0].RequestID != "r1" || rec.got[0].Answer.Argv != nil {
			t.Errorf("%s: %+v", tc.k, rec.got)
		}
		if !quits(cmd) {
			t.Errorf("%s: program does not quit with an empty queue", tc.k)
		}
	}
}

func TestOtherKeysDoNothing(t *testing.T) {
	rec := &recorder{}
	m := newModel(req("r1", "make"), resolver, rec.decide)
	for _, k := range []string{"y", "enter", " ", "x"} {
		m.Update(key(k))
	}
	if len(rec.got) != 0 {
		t.Fatalf("decided on a stray key: %+v", rec.got)
	}
}

func TestQueueAndAbort(t *testing.T) {
	rec := &recorder{}
	m := newModel(req("r1", "make"), resolver, rec.decide)
	m.Update(AddMsg{Request: req("r2", "cargo")})
	m.Update(AddMsg{Request: req("r3", "npm")})
	if !strings.Contains(plain(m.Render()), "2 more waiting") {
		t.Fatal("queue length not shown")
	}
	_, cmd := m.Update(key("d"))
	if quits(cmd) || !strings.Contains(plain(m.Render()), "/usr/bin/cargo") {
		t.Fatal("next request not shown after a decision")
	}
	m.Update(CancelMsg{RequestID: "r3"})
	m.Update(AddMsg{Request: req("r4", "go")})
	_, cmd = m.Update(key("q"))
	if !quits(cmd) {
		t.Fatal("Q does not quit")
	}
	want := []Decision{{"r1", escprompt.Answer{Action: escprompt.Deny}}, {"r2", escprompt.Answer{Action: escprompt.Abort}}, {"r4", escprompt.Answer{Action: escprompt.Deny}}}
	if len(rec.got) != 3 || rec.got[0].RequestID != "r1" || rec.got[1].Answer.Action != want[1].Answer.Action || rec.got[1].RequestID != "r2" || rec.got[2].RequestID != "r4" || rec.got[2].Answer.Action != escprompt.Deny {
		t.Fatalf("decisions %+v", rec.got)
	}
}

func TestEditReparsesAndShowsAgain(t *testing.T) {
	rec := &recorder{}
	m := newModel(req("r1", "make", "lint", "--eval=x"), resolver, rec.decide)
	m.Update(key("e"))
	if got := string(m.buf); got != "make lint --eval=x" {
		t.Fatalf("editor starts with %q", got)
	}
	m.Update(key("ctrl+u"))
	typeText(m, "make lint; rm -rf ~")
	m.Update(key("enter"))
	if m.mode != editing || !strings.Contains(plain(m.Render()), "cannot run that") {
		t.Fatal("a compound edit was accepted")
	}
	m.Update(key("ctrl+u"))
	typeText(m, "make 'lint x'")
	m.Update(key("enter"))
	// Shown again, not yet run.
	if len(rec.got) != 0 || m.mode != viewing {
		t.Fatal("edit ran without a second look")
	}
	view := plain(m.Render())
	if !strings.Contains(view, `argv[1]    "lint x"`) || strings.Contains(view, "--eval") {
		t.Fatalf("edited command not shown:\n%s", view)
	}
	m.Update(key("a"))
	if len(rec.got) != 1 || !slices.Equal(rec.got[0].Answer.Argv, []string{"make", "lint x"}) || rec.got[0].Answer.Executable != "/usr/bin/make" {
		t.Fatalf("edit decision %+v", rec.got)
	}
}

func TestEditUnknownExecutable(t *testing.T) {
	rec := &recorder{}
	m := newModel(req("r1", "make"), resolver, rec.decide)
	m.Update(key("e"))
	m.Update(key("ctrl+u"))
	typeText(m, "nosuch arg")
	m.Update(key("enter"))
	if m.mode != editing || !strings.Contains(plain(m.Render()), "no such executable") {
		t.Fatal("unresolvable edit accepted")
	}
	m.Update(key("esc"))
	m.Update(key("a"))
	if len(rec.got) != 1 || rec.got[0].Answer.Argv != nil {
		t.Fatalf("after Esc the original should be approved: %+v", rec.got)
	}
}

func TestCompoundCannotBeApproved(t *testing.T) {
	rec := &recorder{}
	r := req("r1", "x")
	r.Argv, r.Executable, r.Command = nil, "", "make lint; rm -rf ~"
	m := newModel(r, resolver, rec.decide)
	m.Update(key("a"))
	if len(rec.got) != 0 || !strings.Contains(plain(m.Render()), "press E to edit") {
		t.Fatal("compound command approved")
	}
	if !strings.Contains(plain(m.Render()), `"make lint; rm -rf ~"`) {
		t.Fatal("command string not shown")
	}
}

var sgr = regexp.MustCompile(`\x1b\[[0-9;:]*m`)

// rawControls are what must never reach the terminal from request data:
// any ESC left after removing the view's own colour sequences, other C0/C1
// controls, and bidi/zero-width characters.
func rawControls(view string) []rune {
	var bad []rune
	for _, r := range sgr.ReplaceAllString(view, "") {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) || visible.Hidden(r) {
			bad = append(bad, r)
		}
	}
	return bad
}

func TestViewShowsEscapesVisible(t *testing.T) {
	// printf '\x1b[2J\x1b[Hrm -rf /' with the escapes as real bytes: on a
	// terminal they would clear the screen and show only "rm -rf /".
	m := newModel(req("r1", "printf", "\x1b[2J\x1b[Hrm -rf /"), resolver, func(Decision) {})
	view := plain(m.Render())
	if !strings.Contains(view, `"\x1b[2J\x1b[Hrm -rf /"`) {
		t.Fatalf("escape not shown visibly:\n%s", view)
	}
	if bad := rawControls(view); len(bad) != 0 {
		t.Fatalf("raw control characters in the view: %q", bad)
	}
	// Positive control: the detector finds the raw bytes when they are
	// rendered as they are.
	if len(rawControls("printf \x1b[2J\x1b[Hrm -rf /")) == 0 {
		t.Fatal("control: detector misses raw escapes")
	}
}

func TestViewShowsBidiVisible(t *testing.T) {
	// U+202E reverses what follows: "ls  file\u202Egnp.sh" displays as
	// "file hs.png".
	r := req("r1", "sh", "file\u202Egnp.sh")
	r.Justification = "view the \u200bimage\u2066"
	m := newModel(r, resolver, func(Decision) {})
	view := plain(m.Render())
	if !strings.Contains(view, `"file<U+202E>gnp.sh"`) || !strings.Contains(view, "view the <U+200B>image<U+2066>") {
		t.Fatalf("bidi/zero-width not made visible:\n%s", view)
	}
	if bad := rawControls(view); len(bad) != 0 {
		t.Fatalf("raw characters in the view: %q", bad)
	}
	if len(rawControls("file\u202Egnp.sh")) == 0 {
		t.Fatal("control: detector misses U+202E")
	}
}

func TestViewShowsEveryArgumentOnItsOwnLine(t *testing.T) {
	m := newModel(req("r1", "cargo", "fmt", "--check", "a b"), resolver, func(Decision) {})
	view := plain(m.Render())
	for _, want := range []string{"r1", "claude", "because", "/workspace", "/home/u/proj", "/usr/bin/cargo",
		`argv[0]    "cargo"`, `argv[1]    "fmt"`, `argv[2]    "--check"`, `argv[3]    "a b"`} {
		if !strings.Contains(view, want) {
			t.Errorf("view lacks %q:\n%s", want, view)
		}
	}
}

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"a\x1bb":      `a\x1bb`,
		"\\x1b":       `\\x1b`,
		"a\nb\tc\r":   `a\nb\tc\r`,
		"\u0085":      "<U+0085>",
		"\u202e":      "<U+202E>",
		"\ufeff":      "<U+FEFF>",
		"\xff":        `\xff`,
		"héllo wörld": "héllo wörld",
		"\x7f":        `\x7f`,
		"\u00ad":      "<U+00AD>",
		"\U000e0041":  "<U+E0041>",
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}

func plain(s string) string { return sgr.ReplaceAllString(s, "") }
