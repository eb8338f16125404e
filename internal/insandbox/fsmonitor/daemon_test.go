package fsmonitor

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/insandbox/fsmonitor/fsmtest"
)

// parseAnswer splits a hook answer into its token and paths.
func parseAnswer(t *testing.T, b []byte) (tok string, paths []string) {
	t.Helper()
	parts := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	return parts[0], parts[1:]
}

func newTree(t *testing.T) (string, *Daemon) {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"a", "b/c", ".git/objects"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, f := range []string{"a/1", "a/2", "b/c/3", "top"} {
		os.WriteFile(filepath.Join(root, f), []byte(f), 0o644)
	}
	d, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return root, d
}

// ask asks d about root with tok and returns the new token, whether the
// answer was "/", and the paths.
func ask(t *testing.T, d *Daemon, dir, tok string) (string, bool, []string) {
	t.Helper()
	nt, paths := parseAnswer(t, d.Query(Request{Dir: dir, Token: tok}))
	if len(paths) == 1 && paths[0] == "/" {
		return nt, true, nil
	}
	return nt, false, paths
}

func TestDaemonAnswers(t *testing.T) {
	root, d := newTree(t)
	tok, full, _ := ask(t, d, root, "1700000000000000000")
	if !full {
		t.Fatal("a token from elsewhere did not get a full answer")
	}
	tok2, full, paths := ask(t, d, root, tok)
	if full || len(paths) != 0 || tok2 != tok {
		t.Fatalf("no change: got %q full=%v %q", tok2, full, paths)
	}
	os.WriteFile(filepath.Join(root, "a/1"), []byte("changed"), 0o644)
	os.Remove(filepath.Join(root, "b/c/3"))
	os.WriteFile(filepath.Join(root, "new"), nil, 0o644)
	os.Chmod(filepath.Join(root, "top"), 0o755)
	os.WriteFile(filepath.Join(root, ".git", "index"), nil, 0o644)
	tok3, full, paths := ask(t, d, root, tok)
	if full || strings.Join(paths, " ") != "a/1 b/c/3 new top" {
		t.Fatalf("after edits: full=%v %q", full, paths)
	}
	// An older token still gets everything since it; the newest nothing.
	if _, _, paths := ask(t, d, root, tok3); len(paths) != 0 {
		t.Fatalf("newest token: %q", paths)
	}
	// Another work tree (a repository elsewhere in the sandbox, a
	// subdirectory) is not what the daemon watches.
	if _, full, _ := ask(t, d, filepath.Join(root, "a"), tok3); !full {
		t.Fatal("a query from another directory was answered from the watch")
	}
	// A token from the future (or another instance) gets "/".
	if _, full, _ := ask(t, d, root, Token{Instance: d.instance, Seq: d.seq + 5}.String()); !full {
		t.Fatal("a token from the future was accepted")
	}
	if _, full, _ := ask(t, d, root, Token{Instance: "0000000000000000", Seq: 0}.String()); !full {
		t.Fatal("another instance's token was accepted")
	}
}

func TestDaemonDirectoryEventsAreFull(t *testing.T) {
	root, d := newTree(t)
	steps := []struct {
		name string
		do   func()
	}{
		{"mkdir", func() { os.Mkdir(filepath.Join(root, "n"), 0o755) }},
		{"rename dir", func() { os.Rename(filepath.Join(root, "b"), filepath.Join(root, "b2")) }},
		{"rmdir", func() { os.RemoveAll(filepath.Join(root, "a")) }},
	}
	tok, _, _ := ask(t, d, root, "")
	for _, s := range steps {
		s.do()
		var full bool
		tok, full, _ = ask(t, d, root, tok)
		if !full {
			t.Fatalf("%s: not a full answer", s.name)
		}
	}
	// The renamed directory is watched under its new name, the new one
	// too, and nothing under the old name is reported.
	os.WriteFile(filepath.Join(root, "b2/c/3"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(root, "n/f"), []byte("x"), 0o644)
	_, full, paths := ask(t, d, root, tok)
	if full || strings.Join(paths, " ") != "b2/c/3 n/f" {
		t.Fatalf("after the directory changes: full=%v %q", full, paths)
	}
}

func TestDaemonHardLinkDisables(t *testing.T) {
	root, d := newTree(t)
	tok, _, _ := ask(t, d, root, "")
	if err := os.Link(filepath.Join(root, "a/1"), filepath.Join(root, "hl")); err != nil {
		t.Skip(err)
	}
	if _, full, _ := ask(t, d, root, tok); !full || d.Disabled() == "" {
		t.Fatal("a hard link did not disable the daemon")
	}
	// One that exists at start does too.
	d2, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if d2.Disabled() == "" {
		t.Fatal("a hard link present at start did not disable the daemon")
	}
}

func TestHookFallsBack(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Hook([]string{"2", "tok"}, filepath.Join(t.TempDir(), "nothing.sock"), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if out.String() != FallbackToken+"\x00/\x00" {
		t.Fatalf("without a daemon: %q", out.String())
	}
	out.Reset()
	if code := Hook([]string{"1", "1700000000"}, "x", &out, &errOut); code == 0 || out.Len() != 0 {
		t.Fatalf("protocol 1: exit %d, %q", code, out.String())
	}
}

func gitIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

// conformance runs fsmtest.Steps in a fresh repository on the host with
// the daemon and this test binary as the hook; fsmGit are extra git
// options for the monitored status.
func conformance(t *testing.T, fsmGit func(dir string) string) fsmtest.Report {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	ws := filepath.Join(tmp, "ws")
	os.Mkdir(ws, 0o755)
	if err := fsmtest.Seed(ws); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(tmp, "fsm.sock")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "GIT_CONFIG_NOSYSTEM=1",
		"LAZARET_FSMONITOR_SOCKET=" + sock, hookEnv + "=1",
		"GIT_CONFIG_COUNT=3",
		"GIT_CONFIG_KEY_0=core.fsmonitor", "GIT_CONFIG_VALUE_0=" + exe,
		"GIT_CONFIG_KEY_1=core.fsmonitorHookVersion", "GIT_CONFIG_VALUE_1=2",
		"GIT_CONFIG_KEY_2=core.untrackedCache", "GIT_CONFIG_VALUE_2=true",
		"FSM_GIT=" + fsmGit(tmp)}
	gitIn(t, ws, env, "init", "-q", "-b", "main")
	gitIn(t, ws, env, "add", "-A")
	gitIn(t, ws, env, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "seed")
	d, err := New(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go d.Run()
	go d.Serve(ln)
	cmd := exec.Command("bash", "-c", fsmtest.Steps)
	cmd.Dir = ws
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("steps: %v\n%s", err, out)
	}
	r := fsmtest.Parse(string(out))
	if !r.Done {
		t.Fatalf("steps did not finish:\n%s", out)
	}
	t.Logf("steps output:\n%s", out)
	return r
}

// TestConformanceOnHost: with the fsmonitor, git status equals a full
// scan after every step, and most steps were answered incrementally (so
// the comparison tested the fsmonitor, not a string of full scans).
func TestConformanceOnHost(t *testing.T) {
	r := conformance(t, func(string) string { return "" })
	if len(r.Mismatches) > 0 {
		t.Errorf("git status with the fsmonitor differs from a full scan after: %v", r.Mismatches)
	}
	if len(r.Incremental) < 10 {
		t.Errorf("only %d steps were answered incrementally (%v): the check did not exercise the fsmonitor", len(r.Incremental), r.Incremental)
	}
}

// TestConformanceControl: a hook that always claims nothing changed is
// caught by the same comparison.
func TestConformanceControl(t *testing.T) {
	r := conformance(t, func(tmp string) string {
		exe, _ := os.Executable()
		liar := filepath.Join(tmp, "liar")
		if err := os.WriteFile(liar, []byte(fsmtest.Liar(exe)), 0o755); err != nil {
			t.Fatal(err)
		}
		return "-c core.fsmonitor=" + liar
	})
	if len(r.Mismatches) == 0 {
		t.Fatal("a lying fsmonitor hook went unnoticed")
	}
	t.Logf("the lying hook was caught after %d steps: %v", len(r.Mismatches), r.Mismatches)
}

// A file created and deleted between two drains may have been a hard
// link through which something else changed: everything is reported. A
// file written beside its target and renamed over it (sed -i, editors) is
// checked under its new name and reported normally.
func TestDaemonCreatedThenGone(t *testing.T) {
	root, d := newTree(t)
	tok, _, _ := ask(t, d, root, "")
	tmp := filepath.Join(root, "a", ".tmp")
	os.WriteFile(tmp, []byte("new"), 0o644)
	os.Rename(tmp, filepath.Join(root, "a", "1"))
	tok, full, paths := ask(t, d, root, tok)
	if full || strings.Join(paths, " ") != "a/.tmp a/1" {
		t.Fatalf("write and rename: full=%v %q", full, paths)
	}
	os.WriteFile(tmp, []byte("x"), 0o644)
	os.Remove(tmp)
	if _, full, _ := ask(t, d, root, tok); !full {
		t.Fatal("a file created and deleted unseen did not give a full answer")
	}
	if d.Disabled() != "" {
		t.Fatalf("disabled: %s", d.Disabled())
	}
}

// The daemon read a file's creation, and the file was renamed before its
// link check: the check follows it to its new name (no "/"). One that was
// unlinked instead gives "/".
func TestDaemonPendingSettledByQueue(t *testing.T) {
	root, d := newTree(t)
	tok, _, _ := ask(t, d, root, "")
	tmp := filepath.Join(root, "a", ".tmp")
	d.mu.Lock()
	os.WriteFile(tmp, []byte("new"), 0o644)
	d.readQueue()
	os.Rename(tmp, filepath.Join(root, "a", "2"))
	d.checkPending()
	full := d.fullSeq
	d.mu.Unlock()
	tok, isFull, paths := ask(t, d, root, tok)
	if isFull || full != 0 || strings.Join(paths, " ") != "a/.tmp a/2" {
		t.Fatalf("renamed before its check: full=%v (fullSeq %d) %q", isFull, full, paths)
	}
	d.mu.Lock()
	os.WriteFile(tmp, []byte("new"), 0o644)
	d.readQueue()
	os.Remove(tmp)
	d.checkPending()
	d.mu.Unlock()
	if _, isFull, _ := ask(t, d, root, tok); !isFull {
		t.Fatal("unlinked before its check: not a full answer")
	}
}
