package prompt

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// longRequest is the attack of issue #12: a request long enough to push
// the dangerous last word, the directory and the key legend off screen.
func longRequest(words int) escprompt.PromptRequest {
	argv := []string{"make", "lint"}
	for i := 0; len(argv) < words-1; i++ {
		argv = append(argv, fmt.Sprintf("target-%03d", i))
	}
	argv = append(argv, "SHELL=/bin/cat")
	r := req("r1", argv...)
	r.Justification = strings.Repeat("routine lint run, nothing to see here\n", 40) + "really"
	r.HostDir = "/home/u/" + strings.Repeat("deep/", 30) + "proj"
	r.SessionCommand, r.SessionPID, r.SessionStarted = []string{"shell"}, 4242, time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	return r
}

// checkScreen: the render is exactly the terminal, every line fits, and
// the pinned lines (host directory, executable, legend, position) are on it.
func checkScreen(t *testing.T, m *Model, w, h int, more ...string) string {
	t.Helper()
	view := m.Render()
	lines := strings.Split(strings.TrimSuffix(view, "\n"), "\n")
	if len(lines) != h {
		t.Fatalf("%dx%d: %d lines", w, h, len(lines))
	}
	for _, l := range lines {
		if ansi.StringWidth(l) > w {
			t.Fatalf("%dx%d: line wider than the terminal: %q", w, h, plain(l))
		}
	}
	p := plain(view)
	for _, want := range append([]string{"runs in", "proj", "executable /usr/bin/make", "[Q] abort"}, more...) {
		if !strings.Contains(p, want) {
			t.Fatalf("%dx%d: screen lacks %q:\n%s", w, h, want, p)
		}
	}
	return p
}

// TestLongRequestPagesAndRefusesEarlyA: at several terminal sizes, a
// 300-word argv with many lines of reason never pushes the directory or
// the legend off screen, says how much is below, refuses A until every
// line was shown (the dangerous last word included), then approves.
func TestLongRequestPagesAndRefusesEarlyA(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {40, 12}, {120, 40}, {200, 60}, {50, 15}} {
		w, h := sz[0], sz[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			rec := &recorder{}
			m := ungated(New(longRequest(300), resolver, rec.decide))
			m.Update(tea.WindowSizeMsg{Width: w, Height: h})
			first := checkScreen(t, m, w, h, "session    lazaret shell")
			if !strings.Contains(first, "more lines") || !strings.Contains(first, "more words") {
				t.Fatalf("no 'N more' hint:\n%s", first)
			}
			m.Update(key("a"))
			if len(rec.got) != 0 || !strings.Contains(plain(m.Render()), "A is refused") {
				t.Fatalf("A accepted on the first page:\n%s", plain(m.Render()))
			}
			// Jumping to the end does not count the middle as seen.
			m.Update(key("G"))
			last := checkScreen(t, m, w, h)
			if !strings.Contains(last, "SHELL=/bin/cat") {
				t.Fatalf("last page lacks the last word:\n%s", last)
			}
			m.Update(key("a"))
			if len(rec.got) != 0 {
				t.Fatal("A accepted after skipping the middle")
			}
			m.Update(key("g"))
			pages := 0
			for ; pages < 1000; pages++ {
				checkScreen(t, m, w, h)
				if lines, _ := m.unseen(); lines == 0 {
					break
				}
				m.Update(key(" "))
			}
			if pages < 2 {
				t.Fatalf("the request fit on %d page(s); the test needs paging", pages+1)
			}
			m.Update(key("a"))
			if len(rec.got) != 1 || rec.got[0].Answer.Action != escprompt.Approve {
				t.Fatalf("A after reading everything: %+v", rec.got)
			}
		})
	}
}

// TestShortRequestApprovesAtOnce: a request that fits is seen whole as
// soon as it is shown (control of the paging rule).
func TestShortRequestApprovesAtOnce(t *testing.T) {
	rec := &recorder{}
	m := newModel(req("r1", "make", "lint"), resolver, rec.decide)
	checkScreen(t, m, 80, 24)
	m.Update(key("a"))
	if len(rec.got) != 1 {
		t.Fatal("a request that fits was not approvable")
	}
}

// TestNoSizeNoApproval: before the terminal reported its size nothing was
// provably shown, so A is refused.
func TestNoSizeNoApproval(t *testing.T) {
	rec := &recorder{}
	m := ungated(New(req("r1", "make", "lint"), resolver, rec.decide))
	m.Update(key("a"))
	if len(rec.got) != 0 {
		t.Fatal("approved before the terminal size was known")
	}
}

// TestTinyTerminalRefusesA: below the minimum size the request cannot be
// shown, so A is refused whatever is scrolled.
func TestTinyTerminalRefusesA(t *testing.T) {
	rec := &recorder{}
	m := ungated(New(req("r1", "make", "lint"), resolver, rec.decide))
	m.Update(tea.WindowSizeMsg{Width: 30, Height: 8})
	m.Update(key("a"))
	if len(rec.got) != 0 || !strings.Contains(plain(m.Render()), "too small") {
		t.Fatalf("approved on a 30x8 terminal: %+v", rec.got)
	}
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(key("a"))
	if len(rec.got) != 1 {
		t.Fatal("not approvable after the terminal grew")
	}
}

// TestEditIsCheckedAndShownAgain (issue #12 item 6): an edit that adds a
// make variable or a quoted metacharacter is parsed, resolved and shown
// again from the top, flagged, and runs only on a second A; an edit that
// is not one simple command is refused in the editor.
func TestEditIsCheckedAndShownAgain(t *testing.T) {
	for _, tc := range []struct {
		line, flag string
		argv       []string
	}{
		{"make lint SHELL=/bin/cat", "an assignment", []string{"make", "lint", "SHELL=/bin/cat"}},
		{"make lint 'a;b'", "shell metacharacters", []string{"make", "lint", "a;b"}},
		{"make lint ../x", "'..'", []string{"make", "lint", "../x"}},
		{"env make lint", "env runs any command", []string{"env", "make", "lint"}},
	} {
		rec := &recorder{}
		m := newModel(req("r1", "make", "lint"), resolver, rec.decide)
		m.Update(key("e"))
		m.Update(key("ctrl+u"))
		typeText(m, tc.line)
		m.Update(key("enter"))
		if len(rec.got) != 0 || m.mode != viewing || m.offset != 0 {
			t.Fatalf("%q: not shown again (mode %v, decisions %+v)", tc.line, m.mode, rec.got)
		}
		view := plain(m.Render())
		if !strings.Contains(view, tc.flag) || !strings.Contains(view, "check it again") {
			t.Fatalf("%q: edited command not flagged with %q:\n%s", tc.line, tc.flag, view)
		}
		m.Update(key("a"))
		if len(rec.got) != 1 || !slices.Equal(rec.got[0].Answer.Argv, tc.argv) {
			t.Fatalf("%q: decision %+v", tc.line, rec.got)
		}
	}
	for _, bad := range []string{"make lint; cat ~/.gitconfig", "make lint $(id)", "make lint > /etc/x", "SHELL=/bin/cat make lint"} {
		rec := &recorder{}
		m := newModel(req("r1", "make", "lint"), resolver, rec.decide)
		m.Update(key("e"))
		m.Update(key("ctrl+u"))
		typeText(m, bad)
		m.Update(key("enter"))
		m.Update(key("a")) // typed into the editor, not an approval
		if len(rec.got) != 0 || m.mode != editing || !strings.Contains(plain(m.Render()), "cannot run that") {
			t.Fatalf("%q accepted by the editor: %+v", bad, rec.got)
		}
	}
}

// TestEditedLongCommandMustBeReadAgain: after an edit the whole new
// command must be scrolled through before A, like the original.
func TestEditedLongCommandMustBeReadAgain(t *testing.T) {
	rec := &recorder{}
	m := newModel(req("r1", "make", "lint"), resolver, rec.decide)
	m.Update(key("e"))
	m.Update(key("ctrl+u"))
	typeText(m, "make lint"+strings.Repeat(" word", 200)+" SHELL=/bin/cat")
	m.Update(key("enter"))
	m.Update(key("a"))
	if len(rec.got) != 0 {
		t.Fatal("a long edit was approved before it was read")
	}
}

// FuzzRender: whatever the sandbox puts in a request, at any terminal
// size the prompt fills exactly the screen, no line is wider than it, and
// the key legend is on it.
func FuzzRender(f *testing.F) {
	f.Add("make lint SHELL=/bin/cat", "because\nreally", "/workspace", uint8(80), uint8(24))
	f.Add(strings.Repeat("w ", 300), strings.Repeat("x", 5000), strings.Repeat("/deep", 200), uint8(40), uint8(12))
	f.Add("\x1b[2J 漢字漢字 \u202e", "\t\r\n", "ü", uint8(41), uint8(13))
	f.Fuzz(func(t *testing.T, argv, why, cwd string, w, h uint8) {
		width, height := max(int(w), minWidth), max(int(h), minHeight)
		r := req("r1", append([]string{"make"}, strings.Fields(argv)...)...)
		r.Justification, r.Cwd, r.HostDir = why, cwd, cwd
		m := ungated(New(r, resolver, func(Decision) {}))
		m.Update(tea.WindowSizeMsg{Width: width, Height: height})
		for _, k := range []string{"G", "a", "g", " "} {
			if m.Update(key(k)); m.Pending() == 0 {
				return // approved: the request fitted
			}
			lines := strings.Split(strings.TrimSuffix(m.Render(), "\n"), "\n")
			if len(lines) != height {
				t.Fatalf("%dx%d: %d lines", width, height, len(lines))
			}
			for _, l := range lines {
				if ansi.StringWidth(l) > width {
					t.Fatalf("%dx%d: line of width %d: %q", width, height, ansi.StringWidth(l), plain(l))
				}
			}
			if !strings.Contains(plain(m.Render()), "[Q] abort") {
				t.Fatalf("%dx%d: no legend", width, height)
			}
		}
	})
}
