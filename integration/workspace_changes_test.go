//go:build integration

package integration

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wcRepo is gsRepo plus the files the changes below touch, committed, and
// then the changes: a.txt modified, del.txt deleted, mode.sh made
// executable, a new file with a space and a non-ASCII letter in its name,
// an ignored build.log, a symlink to a host file outside the workspace, a
// file only added to the index.
func wcRepo(t *testing.T, e *Env) (secret string) {
	ws := e.Workspace
	gsRepo(t, ws)
	w := func(p, s string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, p), []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	w(".gitignore", "*.log\n", 0o644)
	w("del.txt", "delete me\n", 0o644)
	w("mode.sh", "#!/bin/sh\necho mode\n", 0o644)
	gsGit(t, ws, "add", ".")
	gsGit(t, ws, "commit", "-q", "-m", "third")
	w("a.txt", "changed on the host\n", 0o644)
	os.Remove(filepath.Join(ws, "del.txt"))
	os.Chmod(filepath.Join(ws, "mode.sh"), 0o755)
	w("new ü.txt", "new and untracked\n", 0o644)
	w("build.log", "ignored\n", 0o644)
	w("staged.txt", "staged only\n", 0o644)
	gsGit(t, ws, "add", "staged.txt")
	secret = filepath.Join(e.Root, "host-secret")
	w("../host-secret", "host secret\n", 0o600)
	if err := os.Symlink(secret, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	return secret
}

// wcHostState is what must not change on the host: status, HEAD, index,
// stash and refs (lazaret's own branch aside), byte for byte.
func wcHostState(t *testing.T, ws string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []string{"HEAD", "index"} {
		data, err := os.ReadFile(filepath.Join(ws, ".git", f))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %x\n", f, sha256.Sum256(data))
	}
	b.WriteString(gsGit(t, ws, "status", "--porcelain", "-z", "--untracked-files=all") + "\n")
	b.WriteString(gsGit(t, ws, "stash", "list") + "\n")
	for _, l := range strings.Split(gsGit(t, ws, "for-each-ref", "--format=%(objectname) %(refname)"), "\n") {
		if !strings.Contains(l, "lazaret/") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// wcLook prints what the agent sees in /workspace.
const wcLook = `cd /workspace
echo "a=$(cat a.txt)"
test -e del.txt && echo DEL-PRESENT
test -x mode.sh && echo MODE-X
echo "new=$(cat 'new ü.txt' 2>/dev/null)"
test -e build.log && echo LOG-PRESENT
echo "staged=$(cat staged.txt 2>/dev/null)"
echo "link=$(readlink out)"
cat out 2>/dev/null && echo OUT-READ
echo status:
git status --porcelain --untracked-files=all
`

// TestWithChanges: --with-changes carries the host's modified, deleted and
// untracked (not ignored) files into the new clone's working tree, the
// symlink as a link (never followed on the host: its target's content is
// not in the sandbox), and leaves the host's status, HEAD, index and stash
// as they were. A second start with the flag is refused: the clone exists.
func TestWithChanges(t *testing.T) {
	e := NewEnv(t)
	secret := wcRepo(t, e)
	before := wcHostState(t, e.Workspace)
	r := e.Run("exec", "--with-changes", "--", "sh", "-c", wcLook)
	if r.Code != 0 {
		t.Fatalf("exec: %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	want := "lazaret: carried 2 modified, 3 untracked and 1 deleted files into the agent's clone (--with-changes)\n"
	if !strings.Contains(r.Stderr, want) {
		t.Errorf("stderr lacks the banner %q:\n%s", want, r.Stderr)
	}
	out := r.Stdout
	for _, s := range []string{"a=changed on the host\n", "MODE-X\n", "new=new and untracked\n", "staged=staged only\n",
		"link=" + secret + "\n", " M a.txt\n", " D del.txt\n", " M mode.sh\n", "?? out\n", "?? staged.txt\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("the agent does not see %q:\n%s", s, out)
		}
	}
	for _, s := range []string{"DEL-PRESENT", "LOG-PRESENT", "OUT-READ", "host secret"} {
		if strings.Contains(out, s) {
			t.Errorf("the agent sees %q:\n%s", s, out)
		}
	}
	if after := wcHostState(t, e.Workspace); after != before {
		t.Errorf("host repository changed:\n%s\n---\n%s", before, after)
	}
	r = e.Run("exec", "--with-changes", "--", "true")
	if r.Code != 2 || !strings.Contains(r.Stderr, "already exists") || !strings.Contains(r.Stderr, "reset-branch") {
		t.Errorf("second --with-changes: %d\n%s", r.Code, r.Stderr)
	}
}

// TestWithChangesProfileKey: with_changes = true in the profile does the
// same; later starts with the key reuse the clone without complaint.
func TestWithChangesProfileKey(t *testing.T) {
	e := NewEnv(t)
	wcRepo(t, e)
	e.WriteConfig("[profiles.wc]\nimage = \"localhost/lazaret-default:latest\"\nwith_changes = true\n")
	r := e.Run("exec", "wc", "--", "cat", "/workspace/a.txt")
	if r.Code != 0 || r.Stdout != "changed on the host\n" {
		t.Fatalf("exec: %d %q\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "(with_changes in profile wc)") {
		t.Errorf("no banner:\n%s", r.Stderr)
	}
	if r := e.Run("exec", "wc", "--", "true"); r.Code != 0 || strings.Contains(r.Stderr, "carried") {
		t.Errorf("second start: %d\n%s", r.Code, r.Stderr)
	}
}

// TestWithChangesControl: without the flag the clone holds the committed
// work only (the behaviour before --with-changes).
func TestWithChangesControl(t *testing.T) {
	e := NewEnv(t)
	wcRepo(t, e)
	before := wcHostState(t, e.Workspace)
	out := e.MustRun("exec", "--", "sh", "-c", wcLook)
	for _, s := range []string{"a=one\ntwo\nthree\n", "DEL-PRESENT", "new=\n", "staged=\n", "link=\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("without the flag the agent does not see %q:\n%s", s, out)
		}
	}
	if after := wcHostState(t, e.Workspace); after != before {
		t.Errorf("host repository changed:\n%s\n---\n%s", before, after)
	}
}

// TestDirectConsent: outside a git repository, exec without a terminal
// fails in one line naming --direct and starts nothing; with --direct the
// agent writes the directory.
func TestDirectConsent(t *testing.T) {
	e := NewEnv(t)
	e.NoDirect = true
	r := e.Run("exec", "--", "sh", "-c", "echo x > /workspace/f")
	if r.Code != 2 || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, "pass --direct to allow that") {
		t.Fatalf("exec without --direct: %d\n%s", r.Code, r.Stderr)
	}
	if _, err := os.Lstat(filepath.Join(e.Workspace, "f")); err == nil {
		t.Error("the command ran")
	}
	d := domainOf(t, e, "default")
	if ids := containersOf(t, d.Hash); len(ids) != 0 {
		t.Errorf("containers left: %v", ids)
	}
	e.MustRun("exec", "--direct", "--", "sh", "-c", "echo x > /workspace/f")
	if data, err := os.ReadFile(filepath.Join(e.Workspace, "f")); err != nil || string(data) != "x\n" {
		t.Errorf("with --direct: %q %v", data, err)
	}
}
