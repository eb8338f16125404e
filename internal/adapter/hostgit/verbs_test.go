package hostgit

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeGit is a git that records its directory and argv (NUL-separated,
// one call per line) in the file it returns, and reads its stdin.
func fakeGit(t *testing.T) (*Git, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	script := "#!/bin/sh\ncat >/dev/null\n{ printf '%s\\0' \"$PWD\" \"$@\"; echo; } >> '" + log + "'\n"
	bin := filepath.Join(dir, "git")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Git{Bin: bin}, log
}

// TestVerbArgv pins the argv every verb gives git (after --no-pager and
// the hardening, which every call carries) and the directory it runs in.
func TestVerbArgv(t *testing.T) {
	ctx := context.Background()
	w, c := t.TempDir(), t.TempDir()
	in := func() io.Reader { return strings.NewReader("x\n") }
	var discard bytes.Buffer
	for _, tc := range []struct {
		call func(g *Git) error
		dir  string
		want []string
	}{
		{func(g *Git) error { return g.Init(ctx, w, "sha1", "lazaret/agent-p") }, w,
			[]string{"init", "-q", "--template=", "--object-format=sha1", "--initial-branch=lazaret/agent-p", w}},
		{func(g *Git) error { return g.InitBare(ctx, w, "/m", "sha256") }, w,
			[]string{"init", "-q", "--bare", "--template=", "--object-format=sha256", "/m"}},
		{func(g *Git) error { _, err := g.RepoPaths(ctx, w); return err }, w,
			[]string{"rev-parse", "--path-format=absolute", "--is-bare-repository", "--show-toplevel", "--git-dir", "--git-common-dir", "--show-object-format"}},
		{func(g *Git) error { _, err := g.ObjectFormat(ctx, GitDir(c)); return err }, c,
			[]string{"--git-dir=" + c, "rev-parse", "--show-object-format"}},
		{func(g *Git) error { _, err := g.VerifyCommit(ctx, WorkTree(w), "HEAD"); return err }, w,
			[]string{"rev-parse", "-q", "--verify", "HEAD^{commit}"}},
		{func(g *Git) error { _, err := g.VerifyCommit(ctx, GitDir(c), "refs/x"); return err }, c,
			[]string{"--git-dir=" + c, "rev-parse", "-q", "--verify", "refs/x^{commit}"}},
		{func(g *Git) error { _, err := g.SymbolicHead(ctx, w); return err }, w,
			[]string{"symbolic-ref", "-q", "HEAD"}},
		{func(g *Git) error { _, err := g.ForEachRef(ctx, GitDir(c), "refs/a", "refs/b"); return err }, c,
			[]string{"--git-dir=" + c, "for-each-ref", "--format=%(objectname) %(refname)", "refs/a", "refs/b"}},
		{func(g *Git) error { _, err := g.WorktreeList(ctx, GitDir(c)); return err }, c,
			[]string{"--git-dir=" + c, "worktree", "list", "--porcelain"}},
		{func(g *Git) error { return g.CreateRef(ctx, w, "m", "refs/heads/b", "1234") }, w,
			[]string{"update-ref", "-m", "m", "refs/heads/b", "1234", ""}},
		{func(g *Git) error { return g.CreateLoggedRef(ctx, GitDir(c), "m", "refs/heads/b", "1234") }, c,
			[]string{"--git-dir=" + c, "-c", "core.logAllRefUpdates=always", "update-ref", "-m", "m", "refs/heads/b", "1234", ""}},
		{func(g *Git) error { return g.UpdateRefs(ctx, GitDir(c), "m", in()) }, c,
			[]string{"--git-dir=" + c, "-c", "core.logAllRefUpdates=always", "update-ref", "-m", "m", "--stdin"}},
		{func(g *Git) error { _, err := g.MergeBase(ctx, w, "a", "b"); return err }, w,
			[]string{"merge-base", "a", "b"}},
		{func(g *Git) error { _, err := g.IsAncestor(ctx, w, "a", "b"); return err }, w,
			[]string{"merge-base", "--is-ancestor", "a", "b"}},
		{func(g *Git) error { _, err := g.RevListCount(ctx, w, "t", "h"); return err }, w,
			[]string{"rev-list", "--count", "t", "--not", "h", "--"}},
		{func(g *Git) error { _, err := g.RevListCount(ctx, w, "t", ""); return err }, w,
			[]string{"rev-list", "--count", "t", "--"}},
		{func(g *Git) error { _, err := g.RevListLeftRight(ctx, w, "h", "a"); return err }, w,
			[]string{"rev-list", "--left-right", "--count", "h...a", "--"}},
		{func(g *Git) error { _, err := g.NewCommits(ctx, GitDir(c), 7, in()); return err }, c,
			[]string{"--git-dir=" + c, "rev-list", "--max-count=7", "--stdin", "--not", "--all"}},
		{func(g *Git) error { return g.CheckConnected(ctx, GitDir(c), in()) }, c,
			[]string{"--git-dir=" + c, "rev-list", "--objects", "--stdin", "--not", "--all", "--quiet"}},
		{func(g *Git) error { _, err := g.CatFileBatch(ctx, WorkTree(w), in()); return err }, w,
			[]string{"cat-file", "--batch"}},
		{func(g *Git) error { _, err := g.CatFileTypes(ctx, GitDir(c), in()); return err }, c,
			[]string{"--git-dir=" + c, "cat-file", "--batch-check=%(objecttype)"}},
		{func(g *Git) error { return g.IndexPack(ctx, GitDir(c), in()) }, c,
			[]string{"--git-dir=" + c, "-c", "transfer.fsckObjects=true", "index-pack", "--stdin", "--fix-thin", "--strict"}},
		{func(g *Git) error { _, err := g.LsTree(ctx, w, "c"); return err }, w,
			[]string{"ls-tree", "-r", "-z", "--full-tree", "c"}},
		{func(g *Git) error { return g.BundleCreate(ctx, w, &discard, &discard, "HEAD", "refs/x") }, w,
			[]string{"bundle", "create", "--quiet", "-", "HEAD", "refs/x"}},
		{func(g *Git) error { _, err := g.ListIndex(ctx, w); return err }, w,
			[]string{"ls-files", "-z", "--stage"}},
		{func(g *Git) error { _, err := g.ListUntracked(ctx, w); return err }, w,
			[]string{"ls-files", "-z", "--others", "--exclude-standard"}},
		{func(g *Git) error { _, err := g.Status(ctx, w, true); return err }, w,
			[]string{"status", "--porcelain", "--ignore-submodules=dirty"}},
		{func(g *Git) error { _, err := g.Status(ctx, w, false); return err }, w,
			[]string{"status", "--porcelain", "--ignore-submodules=dirty", "--untracked-files=no"}},
		{func(g *Git) error { return g.RefreshIndex(ctx, w) }, w,
			[]string{"update-index", "-q", "--refresh"}},
		{func(g *Git) error { return g.Checkout(ctx, w, "b", "s") }, w,
			[]string{"checkout", "-q", "-f", "-B", "b", "s"}},
		{func(g *Git) error { return g.CheckoutDetached(ctx, c, w, "o") }, w,
			[]string{"--git-dir=" + c, "--work-tree=" + w, "checkout", "-q", "--detach", "o"}},
		{func(g *Git) error { _, err := g.ConflictedFiles(ctx, w); return err }, w,
			[]string{"diff", "--name-only", "--diff-filter=U"}},
		{func(g *Git) error { return g.Merge(ctx, w, "msg", "t") }, w,
			[]string{"merge", "-q", "--no-edit", "--no-verify", "-m", "msg", "t"}},
		{func(g *Git) error { return g.MergeSquash(ctx, w, "t") }, w,
			[]string{"merge", "-q", "--squash", "t"}},
		{func(g *Git) error { return g.Commit(ctx, w, "msg") }, w,
			[]string{"commit", "-q", "--no-verify", "--allow-empty", "-m", "msg"}},
		{func(g *Git) error { return g.MergeAbort(ctx, w) }, w, []string{"merge", "--abort"}},
		{func(g *Git) error { return g.ResetMerge(ctx, w) }, w, []string{"reset", "-q", "--merge"}},
		{func(g *Git) error { _, err := g.LogSubjects(ctx, w, "t", "b"); return err }, w,
			[]string{"log", "--format=* %s", "t", "--not", "b"}},
		{func(g *Git) error { _, err := g.ConfigFileRegexp(ctx, w, ".gitmodules", "^p$"); return err }, w,
			[]string{"config", "--file", ".gitmodules", "--null", "--get-regexp", "^p$"}},
		{func(g *Git) error { _, err := g.ConfigScopedRegexp(ctx, w, "^u$"); return err }, w,
			[]string{"config", "--show-scope", "--null", "--get-regexp", "^u$"}},
		{func(g *Git) error {
			return g.StreamDiff(ctx, w, &discard, &discard, DiffView{}, "b", "t")
		}, w, []string{"-c", "core.quotePath=true", "diff", "--color=never", "--no-ext-diff", "--no-textconv", "b", "t", "--"}},
		{func(g *Git) error {
			return g.StreamDiff(ctx, w, &discard, &discard, DiffView{Stat: true, Binary: true}, "b", "t")
		}, w, []string{"-c", "core.quotePath=true", "diff", "--color=never", "--no-ext-diff", "--no-textconv", "--stat", "b", "t", "--"}},
		{func(g *Git) error {
			return g.StreamDiff(ctx, w, &discard, &discard, DiffView{Binary: true}, "b", "t")
		}, w, []string{"-c", "core.quotePath=true", "diff", "--color=never", "--no-ext-diff", "--no-textconv", "--binary", "b", "t", "--"}},
		{func(g *Git) error {
			return g.StreamLog(ctx, w, &discard, &discard, LogView{}, "t", "h")
		}, w, []string{"-c", "core.quotePath=true", "log", "--color=never", "--decorate=short", "--no-show-signature", "--no-ext-diff", "--no-textconv", "--pretty=medium", "t", "--not", "h", "--"}},
		{func(g *Git) error {
			return g.StreamLog(ctx, w, &discard, &discard, LogView{Oneline: true}, "t", "")
		}, w, []string{"-c", "core.quotePath=true", "log", "--color=never", "--decorate=short", "--no-show-signature", "--no-ext-diff", "--no-textconv", "--oneline", "t", "--"}},
		{func(g *Git) error { _, err := g.DiffRaw(ctx, w, "b", "t"); return err }, w,
			[]string{"diff", "--raw", "-z", "--no-renames", "--no-abbrev", "--no-ext-diff", "--no-textconv", "b", "t", "--"}},
	} {
		g, log := fakeGit(t)
		if err := tc.call(g); err != nil {
			t.Errorf("%q: %v", tc.want, err)
			continue
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimSuffix(string(b), "\x00\n"), "\x00")
		prefix := append([]string{tc.dir, "--no-pager"}, hardening...)
		if !slices.Equal(got[:min(len(prefix), len(got))], prefix) {
			t.Errorf("%q: ran in and with %q, want %q first", tc.want, got, prefix)
			continue
		}
		if got = got[len(prefix):]; !slices.Equal(got, tc.want) {
			t.Errorf("argv\n got %q\nwant %q", got, tc.want)
		}
	}
}

func TestWorkTreeDiffCommand(t *testing.T) {
	got := WorkTreeDiffCommand("/workspace", DiffView{Binary: true})
	want := []string{"git", "-C", "/workspace", "--no-pager", "-c", "core.quotePath=true", "diff", "--color=never", "--no-ext-diff", "--no-textconv", "--binary", "HEAD"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
