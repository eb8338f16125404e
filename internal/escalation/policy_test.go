package escalation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	p := &Policy{AutoApprove: [][]string{{"make", "lint"}, {"cargo", "fmt", "--check"}, {"mk"}, {"lint"}, {"sh"}}, Path: bin}
	for _, tc := range []struct {
		argv    []string
		command string
		auto    bool
		why     string
	}{
		{command: "make lint", auto: true},
		{argv: []string{"make", "lint"}, auto: true},
		{command: "make lint src", auto: true},
		{command: `cargo fmt "--check"`, auto: true},
		{command: "mk all", auto: true}, // a symlink to make
		// The rejection list of the issue.
		{command: "make lint; rm -rf ~", why: "not a single simple command"},
		{command: "make lint --eval=$(shell id)", why: "not a single simple command"},
		{command: "make lint --eval=x", why: "begins with '-'"},
		{argv: []string{"make", "lint", "--eval=x"}, why: "begins with '-'"},
		{argv: []string{"make", "lint", "-c"}, why: "begins with '-'"},
		{argv: []string{"cargo", "fmt", "--check", "--", "--config"}, why: "begins with '-'"},
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

func TestPolicyResolvesRealBinary(t *testing.T) {
	bin := fakeBin(t, []string{"make"}, map[string]string{"mk": "make"})
	v := (&Policy{AutoApprove: [][]string{{"mk"}}, Path: bin}).Evaluate([]string{"mk"}, "", "/")
	if v.Executable != filepath.Join(bin, "make") {
		t.Fatalf("executable %q", v.Executable)
	}
}

func TestResolveIgnoresRelativePath(t *testing.T) {
	ws := fakeBin(t, []string{"make"}, nil)
	if _, err := Resolve("make", ws, ".:bin:"); err == nil {
		t.Fatal("relative PATH entry resolved a command in the workspace")
	}
	if got := SafePath(".:/usr/bin::bin:/bin"); got != "/usr/bin:/bin" {
		t.Fatalf("SafePath = %q", got)
	}
}
