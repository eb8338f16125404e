package prompt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
)

// The helper process of TestPromptInTmux: a Runner on the pane's terminal
// asked the 300-word request; it writes the decision to a file.
const tmuxHelperEnv = "LAZARET_PROMPT_TMUX_HELPER"

func TestPromptTmuxHelperProcess(t *testing.T) {
	out := os.Getenv(tmuxHelperEnv)
	if out == "" {
		t.Skip("helper process of TestPromptInTmux")
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{TTY: tty, Resolve: resolver}
	a, err := r.Prompt(context.Background(), longRequest(300))
	r.Wait()
	if err := os.WriteFile(out, []byte(fmt.Sprintf("%s %v\n", a.Action, err)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tmuxRig is a private tmux server (its own socket) with one 80×24 pane.
type tmuxRig struct {
	t      *testing.T
	sock   string
	prev   string
	result string
}

func (x *tmuxRig) tmux(args ...string) string {
	x.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", x.sock}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// capture returns the pane once it differs from the last capture and
// shows want; every capture must show the pinned lines.
func (x *tmuxRig) capture(want string) string {
	x.t.Helper()
	return x.captureWhen(want, func(s string) bool { return strings.Contains(s, want) })
}

func (x *tmuxRig) captureWhen(what string, ok func(string) bool) string {
	x.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := x.tmux("capture-pane", "-p", "-t", "p")
		if ok(s) && s != x.prev {
			x.checkPinned(s)
			x.prev = s
			return s
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("the pane never showed %s:\n%s", what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (x *tmuxRig) checkPinned(s string) {
	x.t.Helper()
	if miss := missingPinned(s); len(miss) > 0 {
		x.t.Fatalf("the pane lacks %q:\n%s", miss, s)
	}
}

func missingPinned(s string) []string {
	var miss []string
	for _, want := range []string{"runs in", "/proj", "executable /usr/bin/make", "[A] approve and run", "[Q] abort lazaret", "session    lazaret shell (pid 4242"} {
		if !strings.Contains(s, want) {
			miss = append(miss, want)
		}
	}
	return miss
}

func (x *tmuxRig) decided() string {
	b, _ := os.ReadFile(x.result)
	return string(b)
}

var linesRE = regexp.MustCompile(`lines (\d+)–(\d+) of (\d+)`)

// TestPromptInTmux (issue #12 item 4): the real Runner in a real 80×24
// terminal (tmux), asked a 300-word argv whose last word is the dangerous
// one. Every screen shows the host directory, the executable and the key
// legend; A is refused on the first page and after jumping to the end;
// only once every page was shown does A approve.
func TestPromptInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	dir := t.TempDir()
	x := &tmuxRig{t: t, sock: filepath.Join(dir, "tmux.sock"), result: filepath.Join(dir, "decision")}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", x.sock, "kill-server").Run() })
	unpagedControl(t, x, dir)
	x.tmux("new-session", "-d", "-s", "p", "-x", "80", "-y", "24", "-e", tmuxHelperEnv+"="+x.result,
		exe, "-test.run=^TestPromptTmuxHelperProcess$")
	first := x.capture("more words")
	if !strings.Contains(first, "lines 1–") {
		t.Fatalf("not at the top:\n%s", first)
	}
	// Each answer waits until what the screen shows is readable (the
	// readability gate: scrolling restarts it).
	readable(MinReadable)
	x.tmux("send-keys", "-t", "p", "a")
	x.capture("A is refused")
	x.tmux("send-keys", "-t", "p", "G")
	last := x.capture("end of request")
	if !strings.Contains(last, `"SHELL=/bin/cat"`) {
		t.Fatalf("the last page lacks the last word:\n%s", last)
	}
	readable(MinReadable)
	x.tmux("send-keys", "-t", "p", "a")
	x.capture("A is refused") // the middle was skipped
	if d := x.decided(); d != "" {
		t.Fatalf("decided before the whole request was shown: %s", d)
	}
	x.tmux("send-keys", "-t", "p", "g")
	s := x.capture("lines 1–")
	pages := 1
	for {
		m := linesRE.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("no position line:\n%s", s)
		}
		if m[2] == m[3] {
			break
		}
		if x.decided() != "" {
			t.Fatal("decided while scrolling")
		}
		x.tmux("send-keys", "-t", "p", "Space")
		from, _ := strconv.Atoi(m[1])
		s = x.captureWhen("the next page", func(s string) bool {
			n := linesRE.FindStringSubmatch(s)
			if n == nil {
				return false
			}
			a, _ := strconv.Atoi(n[1])
			return a > from
		})
		pages++
	}
	if pages < 10 {
		t.Fatalf("only %d pages: the request should not fit", pages)
	}
	readable(MinReadable)
	x.tmux("send-keys", "-t", "p", "a")
	deadline := time.Now().Add(30 * time.Second)
	for x.decided() == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if d := x.decided(); d != "approve <nil>\n" {
		t.Fatalf("decision after reading every page: %q", d)
	}

}

// unpagedControl is the positive control of TestPromptInTmux: the same
// request printed unpaged (the prompt before issue #12 wrote every line)
// leaves pinned lines off an 80×24 screen, so the checks can fail.
func unpagedControl(t *testing.T, x *tmuxRig, dir string) {
	t.Helper()
	m := New(longRequest(300), resolver, func(Decision) {})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	l := m.layout()
	all := slices.Clone(l.top)
	for _, b := range l.body {
		all = append(all, b.text)
	}
	all = append(all, l.bottom...)
	dump := filepath.Join(dir, "unpaged")
	if err := os.WriteFile(dump, []byte(strings.Join(all, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	x.tmux("-f", "/dev/null", "new-session", "-d", "-s", "c", "-x", "80", "-y", "24", "cat "+dump+"; echo end-of-dump; exec sleep 600")
	var ctl string
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(ctl, "end-of-dump") && time.Now().Before(deadline) {
		ctl = x.tmux("capture-pane", "-p", "-t", "c")
		time.Sleep(20 * time.Millisecond)
	}
	if len(missingPinned(ctl)) == 0 {
		t.Fatalf("control: the unpaged request kept every pinned line on screen:\n%s", ctl)
	}
}
