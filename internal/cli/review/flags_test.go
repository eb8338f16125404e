package review

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

func TestSymlinkEscapes(t *testing.T) {
	tree := symlinkTree{
		"abs":        "/etc/passwd",
		"up":         "../x",
		"in":         "a/b",
		"a/up2":      "../../y",
		"a/fine":     "../in",
		"a/b/s":      "../../f",
		"a/b/x":      "s/../..",  // looks local, resolves above the top
		"a/b/y":      "s2/../..", // s2 is not a symlink: stays inside
		"gitdir":     ".git/config",
		"gitdir2":    "a/../.GIT/hooks",
		"loop1":      "loop2",
		"loop2":      "loop1",
		"via":        "absdir/x",
		"absdir":     "/tmp",
		"dot":        ".",
		"deep/chain": "../in/../a/b/s",
	}
	want := map[string]bool{
		"abs": true, "up": true, "in": false, "a/up2": true, "a/fine": false, "a/b/s": false,
		"a/b/x": true, "a/b/y": false, "gitdir": true, "gitdir2": true, "loop1": true, "loop2": true,
		"via": true, "absdir": true, "dot": false, "deep/chain": false,
	}
	for p, w := range want {
		if got, why := tree.escapes(p); got != w {
			t.Errorf("%s -> %s: escapes = %v (%s), want %v", p, tree[p], got, why, w)
		}
	}
}

func TestAutorun(t *testing.T) {
	for p, want := range map[string]bool{
		".envrc": true, "sub/.envrc": true, ".vscode/tasks.json": true, "x/.vscode/settings.json": true,
		".devcontainer/devcontainer.json": true, ".husky/pre-commit": true, ".githooks/post-merge": true,
		"Makefile": true, "rules.mk": true, "package.json": true, ".github/workflows/ci.yml": true,
		".gitlab-ci.yml": true, ".gitattributes": true, ".gitmodules": true, ".pre-commit-config.yaml": true,
		".npmrc": true, ".cargo/config.toml": true, "pyproject.toml": true, "setup.py": true, "build.rs": true,
		"src/main.go": false, "README.md": false, "docs/Makefile.txt": false, "a.txt": false,
	} {
		if got := autorun(p) != ""; got != want {
			t.Errorf("autorun(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestParseRawDiff(t *testing.T) {
	out := []byte(":000000 120000 0000000000000000000000000000000000000000 1111111111111111111111111111111111111111 A\x00link\x00" +
		":100644 100755 2222222222222222222222222222222222222222 2222222222222222222222222222222222222222 M\x00bin/x y\x00")
	e, err := parseRawDiff(out)
	if err != nil || len(e) != 2 || e[0].dstMode != "120000" || e[1].path != "bin/x y" || e[1].status != 'M' {
		t.Fatalf("%+v %v", e, err)
	}
	for _, bad := range []string{":100644 100755 x\x00p\x00", ":1 2 3 4 M\x00", "100644 100755 a b M\x00p\x00"} {
		if _, err := parseRawDiff([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestFlagsAndMergeRefusal: the agent's branch adds an external symlink,
// an inside one, an executable and an .envrc; Flags names them, Merge
// refuses the external symlink and leaves the repository as it was, and
// with AllowExternalSymlinks merges (control: the symlink is then there).
func TestFlagsAndMergeRefusal(t *testing.T) {
	ctx := context.Background()
	ws, r := agentRepo(t, "AGENT")
	gittest.Git(t, ws, "checkout", "-q", "lazaret/agent-p")
	os.Symlink("/etc/passwd", filepath.Join(ws, "ext"))
	os.Symlink("a.txt", filepath.Join(ws, "inside"))
	gittest.Write(t, filepath.Join(ws, "run.sh"), "#!/bin/sh\n")
	os.Chmod(filepath.Join(ws, "run.sh"), 0o755)
	gittest.Write(t, filepath.Join(ws, ".envrc"), "echo hi\n")
	gittest.Git(t, ws, "add", "-A")
	gittest.Git(t, ws, "commit", "-q", "-m", "plants")
	gittest.Git(t, ws, "checkout", "-q", "main")
	gittest.Git(t, ws, "commit", "-q", "--allow-empty", "-m", "host moved")
	flags, err := r.Flags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range flags {
		got = append(got, f.Kind+":"+f.Path)
	}
	slices.Sort(got)
	// (write makes every file 0755: .envrc is a new executable too)
	want := []string{FlagAutorun + ":.envrc", FlagExternalSymlink + ":ext", FlagExecutable + ":.envrc", FlagExecutable + ":run.sh"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("flags %v, want %v", got, want)
	}
	before := gittest.Snapshot(t, ws)
	_, err = r.Merge(ctx, false)
	var ext *ExternalSymlinkError
	if !errors.As(err, &ext) || len(ext.Links) != 1 || ext.Links[0].Path != "ext" {
		t.Fatalf("merge: %v", err)
	}
	if after := gittest.Snapshot(t, ws); after != before {
		t.Errorf("a refused merge changed the repository")
	}
	r.AllowExternalSymlinks = true
	if _, err := r.Merge(ctx, false); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "ext")); err != nil || target != "/etc/passwd" {
		t.Errorf("control: merged symlink %q %v", target, err)
	}
}

// FuzzFlagParsers: the parsers of what host git prints about the agent's
// trees (paths and targets are the agent's) never panic, and resolution
// always ends.
func FuzzFlagParsers(f *testing.F) {
	f.Add([]byte(":000000 120000 0000000000000000000000000000000000000000 1111111111111111111111111111111111111111 A\x00link\x00"), "a/b/x", "s/../..")
	f.Add([]byte("120000 blob 1111111111111111111111111111111111111111\tl\x00"), "l", "../../..")
	f.Add([]byte("1111111111111111111111111111111111111111 blob 3\nabc\n"), "x", "/abs")
	f.Fuzz(func(t *testing.T, out []byte, p, target string) {
		_, _ = parseRawDiff(out)
		_, _ = treeSymlinks(out)
		_, _ = parseBatch(out, 2)
		tree := symlinkTree{p: target, target: p, "s": target}
		for k := range tree {
			tree.escapes(k)
		}
		if esc, _ := (symlinkTree{"x": target}).escapes("x"); !esc && len(target) > 0 && target[0] == '/' {
			t.Errorf("absolute target %q not flagged", target)
		}
	})
}
