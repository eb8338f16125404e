package gitsentry

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

// carryRepo is a repository with every kind of uncommitted change
// --with-changes meets; it returns the workspace and what the clone must
// hold afterwards (path → content, "->target" for a symlink, "" absent).
func carryRepo(t *testing.T) (string, map[string]string) {
	ws := gittest.NewRepo(t) // a.txt
	w := func(p, s string, mode os.FileMode) {
		t.Helper()
		gittest.Write(t, filepath.Join(ws, p), s)
		if err := os.Chmod(filepath.Join(ws, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	w("del.txt", "delete me\n", 0o644)
	w("mode.sh", "#!/bin/sh\n", 0o644)
	w("old name.txt", "renamed\n", 0o644)
	w("dir/x", "in dir\n", 0o644)
	w(".gitignore", "*.log\n", 0o644)
	w("same.txt", "unchanged\n", 0o644)
	gittest.Git(t, ws, "add", ".")
	gittest.Git(t, ws, "commit", "-q", "-m", "base")
	// The changes.
	w("a.txt", "changed\n", 0o644)
	os.Remove(filepath.Join(ws, "del.txt"))
	os.Chmod(filepath.Join(ws, "mode.sh"), 0o755)
	os.Rename(filepath.Join(ws, "old name.txt"), filepath.Join(ws, "new name.txt"))
	os.RemoveAll(filepath.Join(ws, "dir"))
	os.Symlink("/etc", filepath.Join(ws, "dir")) // a tracked dir now a link out
	weird := "sp ace\nnewline-ü.txt"
	w(weird, "weird\n", 0o644)
	w("build.log", "ignored\n", 0o644)
	w("tool.sh", "#!/bin/sh\necho hi\n", 0o755)
	w("staged.txt", "staged\n", 0o644)
	gittest.Git(t, ws, "add", "staged.txt")
	os.Symlink("/etc/passwd", filepath.Join(ws, "out"))
	os.Symlink("../../../secret", filepath.Join(ws, "up"))
	big := bytes.Repeat([]byte("0123456789abcdef"), 300<<10) // 4.8 MiB
	if err := os.WriteFile(filepath.Join(ws, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(filepath.Join(ws, "huge.bin"))
	f.Truncate(MaxCarriedFile + 1) // sparse: takes no space
	f.Close()
	syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644) // git lists no FIFO
	gittest.Git(t, filepath.Join(ws), "init", "-q", filepath.Join(ws, "nested"))
	return ws, map[string]string{
		"a.txt": "changed\n", "del.txt": "", "mode.sh": "#!/bin/sh\n", "old name.txt": "",
		"new name.txt": "renamed\n", "dir/x": "", "dir": "->/etc", weird: "weird\n", "build.log": "",
		"tool.sh": "#!/bin/sh\necho hi\n", "staged.txt": "staged\n", "out": "->/etc/passwd",
		"up": "->../../../secret", "big.bin": string(big), "huge.bin": "", "fifo": "", "nested": "",
		"same.txt": "unchanged\n",
	}
}

func TestCarryChanges(t *testing.T) {
	old := MaxCarriedFile
	MaxCarriedFile = 8 << 20
	defer func() { MaxCarriedFile = old }()
	ctx := context.Background()
	g := &hostgit.Git{}
	ws, want := carryRepo(t)
	status := gittest.Git(t, ws, "status", "--porcelain", "-z", "--untracked-files=all")
	before := gittest.Snapshot(t, ws)
	stash := gittest.Git(t, ws, "stash", "list")
	repo, err := gitrepo.OpenHostRepo(ctx, g, ws)
	if err != nil {
		t.Fatal(err)
	}
	a := gittest.Anchor(t, ws, "p1")
	c, err := EnsureCloneWith(ctx, g, repo, a, func(string, ...any) {}, CloneOptions{WithChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// git runs in another process: the clone through this one's descriptor.
	clone := strings.Replace(c.Path(), "/proc/self/", fmt.Sprintf("/proc/%d/", os.Getpid()), 1)
	for p, content := range want {
		fp := filepath.Join(clone, p)
		fi, err := os.Lstat(fp)
		switch {
		case content == "":
			if err == nil {
				t.Errorf("%q is in the clone, want absent", p)
			}
		case strings.HasPrefix(content, "->"):
			target, err := os.Readlink(fp)
			if err != nil || target != content[2:] {
				t.Errorf("%q: link to %q (%v), want %q", p, target, err, content[2:])
			}
		default:
			data, err := os.ReadFile(fp)
			if err != nil || string(data) != content {
				t.Errorf("%q: %.40q (%v), want %.40q", p, data, err, content)
			}
			if fi != nil && fi.Mode()&0o100 == 0 && (p == "mode.sh" || p == "tool.sh") {
				t.Errorf("%q: mode %v, want executable", p, fi.Mode())
			}
		}
	}
	rec, ok := gitrepo.ReadCarried(a.Root())
	if !ok {
		t.Fatal("no carried record")
	}
	if rec.Modified != 2 || rec.Deleted != 3 || rec.Untracked != 8 || rec.NotCarried != "" {
		t.Errorf("carried %+v, want 2 modified, 3 deleted, 8 untracked", rec)
	}
	notes := strings.Join(rec.Notes, "\n")
	for _, n := range []string{"nested/ is a nested repository", "huge.bin is larger than 8 MiB"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes %q lack %q", notes, n)
		}
	}
	// The clone's index and HEAD are the commit: the changes show as
	// uncommitted there, as on the host.
	var idx []string
	for _, l := range strings.Split(gittest.Git(t, clone, "ls-files", "-s"), "\n") {
		meta, p, _ := strings.Cut(l, "\t")
		f := strings.Fields(meta)
		idx = append(idx, f[0]+" "+f[1]+" "+p)
	}
	var tree []string
	for _, l := range strings.Split(gittest.Git(t, ws, "ls-tree", "-r", "HEAD"), "\n") {
		meta, p, _ := strings.Cut(l, "\t")
		f := strings.Fields(meta)
		tree = append(tree, f[0]+" "+f[2]+" "+p)
	}
	if strings.Join(idx, "\n") != strings.Join(tree, "\n") {
		t.Errorf("clone index is not HEAD:\n%s\n---\n%s", idx, tree)
	}
	// The host: nothing changed, byte for byte.
	if after := gittest.Snapshot(t, ws); after != before {
		t.Errorf("host repository changed:\n%s\n---\n%s", before, after)
	}
	if s := gittest.Git(t, ws, "status", "--porcelain", "-z", "--untracked-files=all"); s != status {
		t.Errorf("host status changed: %q -> %q", status, s)
	}
	if s := gittest.Git(t, ws, "stash", "list"); s != stash {
		t.Errorf("host stash changed: %q", s)
	}
}

// TestCarryChangesControl: without the option the clone holds HEAD only
// (the behaviour before --with-changes) and no record is left.
func TestCarryChangesControl(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	ws, _ := carryRepo(t)
	repo, err := gitrepo.OpenHostRepo(ctx, g, ws)
	if err != nil {
		t.Fatal(err)
	}
	a := gittest.Anchor(t, ws, "p1")
	c, err := EnsureClone(ctx, g, repo, a, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if data, _ := os.ReadFile(filepath.Join(c.Path(), "a.txt")); string(data) != "one\ntwo\nthree\n" {
		t.Errorf("a.txt = %q, want HEAD's", data)
	}
	if _, err := os.Lstat(filepath.Join(c.Path(), "tool.sh")); err == nil {
		t.Error("untracked tool.sh carried without the option")
	}
	if _, ok := gitrepo.ReadCarried(a.Root()); ok {
		t.Error("a carried record without the option")
	}
}

// An existing clone is never touched by the option: it may hold the
// agent's own uncommitted work.
func TestCarryChangesExistingClone(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	ws := gittest.NewRepo(t)
	repo, _ := gitrepo.OpenHostRepo(ctx, g, ws)
	a := gittest.Anchor(t, ws, "p1")
	mustEnsureClone(t, ctx, g, repo, a, func(string, ...any) {})
	gittest.Write(t, filepath.Join(ws, "a.txt"), "host edit\n")
	c, err := EnsureCloneWith(ctx, g, repo, a, func(string, ...any) {}, CloneOptions{WithChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if data, _ := os.ReadFile(filepath.Join(c.Path(), "a.txt")); string(data) != "one\ntwo\nthree\n" {
		t.Errorf("existing clone's a.txt = %q", data)
	}
}

// A clone that starts at an agent branch other than HEAD gets nothing,
// and the record says why.
func TestCarryChangesAgentBranchElsewhere(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	ws := gittest.NewRepo(t)
	gittest.Git(t, ws, "branch", "lazaret/agent-p1")
	gittest.Git(t, ws, "commit", "-q", "--allow-empty", "-m", "later")
	gittest.Write(t, filepath.Join(ws, "new.txt"), "x\n")
	repo, _ := gitrepo.OpenHostRepo(ctx, g, ws)
	a := gittest.Anchor(t, ws, "p1")
	c, err := EnsureCloneWith(ctx, g, repo, a, func(string, ...any) {}, CloneOptions{WithChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := os.Lstat(filepath.Join(c.Path(), "new.txt")); err == nil {
		t.Error("carried onto an agent branch that is not at HEAD")
	}
	if rec, _ := gitrepo.ReadCarried(a.Root()); !strings.Contains(rec.NotCarried, "not at your HEAD") {
		t.Errorf("record %+v", rec)
	}
}
