package eschost

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// fakeBin makes a PATH directory with executables of the given names and
// symlinks name→target.
func fakeBin(t *testing.T, names []string, links map[string]string) string {
	t.Helper()
	d := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(d, n), []byte("#!/bin/true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(d, l)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestPolicy(t *testing.T) {
	bin := fakeBin(t, []string{"make", "cargo", "python3.11", "bash"}, map[string]string{"mk": "make", "lint": "python3.11", "sh": "bash"})
	p := &Policy{AutoApprove: [][]string{{"make", "lint"}, {"cargo", "fmt", "--check"}, {"mk", "{args}"}, {"lint"}, {"sh"}}, Path: bin}
	for _, tc := range []struct {
		argv    []string
		command string
		auto    bool
		why     string
	}{
		{command: "make lint", auto: true},
		{argv: []string{"make", "lint"}, auto: true},
		{command: `cargo fmt "--check"`, auto: true},
		{command: "mk all", auto: true}, // a symlink to make, entry with {args}
		{command: "mk", auto: true},
		// An entry without {args} approves exactly its argv.
		{command: "make lint src", why: "approves exactly its words"},
		// The rejection list of the issue.
		{command: "make lint; rm -rf ~", why: "not a single simple command"},
		{command: "make lint --eval=$(shell id)", why: "not a single simple command"},
		{command: "mk --eval=x", why: "an option"},
		{argv: []string{"mk", "-c"}, why: "an option"},
		{argv: []string{"cargo", "fmt", "--check", "--", "--config"}, why: "approves exactly"},
		{command: "make lint \x1b[2J", why: "metacharacters"},
		{argv: []string{"make", "lint", "a\x1b[2Jb"}, why: "metacharacters"},
		{argv: []string{"make", "lint", "a;b"}, why: "metacharacters"},
		{command: "make", why: "no auto_approve entry"},
		{command: "make lin", why: "no auto_approve entry"},
		{command: "make lint-all", why: "no auto_approve entry"},
		// Banned executables, resolved through symlinks at match time even
		// when an entry slipped past config validation.
		{command: "lint", why: "interpreter"},
		{command: "sh", why: "interpreter"},
		{command: "nosuch", why: "no such executable"},
	} {
		v := p.Evaluate(tc.argv, tc.command, "/")
		if v.Auto != tc.auto || (!tc.auto && !strings.Contains(v.Reason, tc.why)) {
			t.Errorf("%q %q: auto=%v reason=%q; want auto=%v reason~%q", tc.argv, tc.command, v.Auto, v.Reason, tc.auto, tc.why)
		}
	}
}

// legacyMatch is the matcher before issue #12 (an entry was a prefix and
// only appended words beginning with "-" were refused), kept as the
// positive control of TestAppendedWords.
func legacyMatch(entries [][]string, argv []string) bool {
	for _, e := range entries {
		if len(e) == 0 || len(argv) < len(e) || !slices.Equal(argv[:len(e)], e) {
			continue
		}
		if !slices.ContainsFunc(argv[len(e):], func(a string) bool { return strings.HasPrefix(a, "-") }) {
			return true
		}
	}
	return false
}

// TestAppendedWords: what may follow an auto_approve entry. With the
// legacy matcher, make's own variables (SHELL, .SHELLFLAGS, MAKEFILES,
// MAKEFLAGS) ran any host program on any host file without a prompt.
func TestAppendedWords(t *testing.T) {
	bin := fakeBin(t, []string{"make", "npm"}, map[string]string{"mynpm": "npm"})
	ws := t.TempDir()
	outside := t.TempDir()
	for _, d := range []string{"sub", "src"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "sub", "pw")); err != nil {
		t.Fatal(err)
	}
	exact := &Policy{AutoApprove: [][]string{{"make", "lint"}}, Path: bin, Workspace: ws}
	args := &Policy{AutoApprove: [][]string{{"make", "lint", "{args}"}, {"npm", "test", "{args}"}}, Path: bin, Workspace: ws}
	for _, tc := range []struct {
		extra  []string
		legacy bool // the old matcher approved it
	}{
		{[]string{"SHELL=/bin/cat"}, true},
		{[]string{"SHELL=/bin/cat", ".SHELLFLAGS=/home/u/.gitconfig"}, true},
		{[]string{".SHELLFLAGS=x"}, true},
		{[]string{"MAKEFILES=x"}, true},
		{[]string{"MAKEFLAGS=x"}, true},
		{[]string{"-f", "x"}, false},
		{[]string{"--eval=x"}, false},
		{[]string{"+x"}, true},
		{[]string{"../x"}, true},
		{[]string{"src/../../x"}, true},
		{[]string{".."}, true},
		{[]string{"/etc/passwd"}, true},
		{[]string{"~/.ssh/id_ed25519"}, true},
		{[]string{"~"}, true},
		{[]string{"$HOME-path"}, true},
		{[]string{"ünïcode"}, true},
		{[]string{"a\u2215etc"}, true}, // division slash
		{[]string{`"quoted"`}, true},
		{[]string{"it's"}, true},
		{[]string{"*.go"}, true},
		{[]string{"a?b"}, true},
		{[]string{"[ab]"}, true},
		{[]string{"{a,b}"}, true},
		{[]string{"a b"}, true},
		{[]string{""}, true},
		{[]string{"out"}, true},          // symlink to a directory outside
		{[]string{"out/new-file"}, true}, // created through it
		{[]string{"sub/pw"}, true},       // symlink to a host file
		{[]string{"ok", "SHELL=/bin/sh"}, true},
	} {
		for _, p := range []*Policy{exact, args} {
			for _, base := range [][]string{{"make", "lint"}, {"npm", "test"}} {
				argv := append(slices.Clone(base), tc.extra...)
				if v := p.Evaluate(argv, "", ws); v.Auto {
					t.Errorf("%q auto-approved by %q", argv, p.AutoApprove)
				}
			}
		}
		if legacyMatch(exact.AutoApprove, append([]string{"make", "lint"}, tc.extra...)) != tc.legacy {
			t.Errorf("legacy matcher on %q: want %v", tc.extra, tc.legacy)
		}
	}
	// Positive control: the attack words of the issue were approved by
	// the old matcher.
	for _, w := range []string{"SHELL=/bin/cat", ".SHELLFLAGS=x", "MAKEFILES=x", "MAKEFLAGS=x"} {
		if !legacyMatch(exact.AutoApprove, []string{"make", "lint", w}) {
			t.Fatalf("positive control: the legacy matcher refuses %q", w)
		}
	}
	// Plain words are admitted where the entry says so, and only there.
	for _, extra := range [][]string{nil, {"unit"}, {"src/pkg", "./sub", "pkg:name", "@scope/pkg", "a,b", "x%y", "v1.2.3", "c++"}} {
		for _, base := range [][]string{{"make", "lint"}, {"npm", "test"}} {
			argv := append(slices.Clone(base), extra...)
			if v := args.Evaluate(argv, "", ws); !v.Auto {
				t.Errorf("%q not auto-approved: %s", argv, v.Reason)
			}
			if v := exact.Evaluate(argv, "", ws); v.Auto != (len(extra) == 0 && base[0] == "make") {
				t.Errorf("exact entry: %q auto=%v", argv, v.Auto)
			}
		}
	}
	// An entry that lets {args} pick a dangerous subcommand is refused at
	// match time too (config validation bypassed), and a request naming
	// one is refused whatever entry matches.
	open := &Policy{AutoApprove: [][]string{{"npm", "{args}"}, {"make", "{args}"}}, Path: bin, Workspace: ws}
	open.AutoApprove = append(open.AutoApprove, []string{"mynpm", "{args}"})
	for _, argv := range [][]string{{"npm", "test"}, {"npm", "isntall", "evil"}, {"npm", "exec", "evil"}, {"mynpm", "exec", "evil"}, {"mynpm", "isntall", "evil"}} {
		if v := open.Evaluate(argv, "", ws); v.Auto {
			t.Errorf("%q auto-approved by an open npm entry", argv)
		}
	}
	if v := open.Evaluate([]string{"make", "all"}, "", ws); !v.Auto {
		t.Errorf("control: make all refused: %s", v.Reason)
	}

	// From a subdirectory, relative words resolve there.
	if v := args.Evaluate([]string{"make", "lint", "pw"}, "", filepath.Join(ws, "sub")); v.Auto {
		t.Error("a symlink to a host file, named from a subdirectory, was auto-approved")
	}
}

func TestPolicyResolvesRealBinary(t *testing.T) {
	bin := fakeBin(t, []string{"make"}, map[string]string{"mk": "make"})
	v := (&Policy{AutoApprove: [][]string{{"mk"}}, Path: bin}).Evaluate([]string{"mk"}, "", "/")
	if v.Executable != filepath.Join(bin, "make") {
		t.Fatalf("executable %q", v.Executable)
	}
}

func TestResolveIgnoresRelativePath(t *testing.T) {
	ws := fakeBin(t, []string{"make"}, nil)
	if _, err := escprompt.Resolve("make", ws, ".:bin:"); err == nil {
		t.Fatal("relative PATH entry resolved a command in the workspace")
	}
	if got := escprompt.SafePath(".:/usr/bin::bin:/bin"); got != "/usr/bin:/bin" {
		t.Fatalf("SafePath = %q", got)
	}
}
