package hostgit

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// The verbs lazaret runs on the host, one method each. Every method builds
// its own argv; the hardening and the environment are command's.

// Repo is where a git call runs: a working tree, or a repository used
// without one.
type Repo struct {
	dir    string
	gitDir bool
}

// WorkTree is git run in dir, a working tree (git finds its repository
// there, never above dir).
func WorkTree(dir string) Repo { return Repo{dir: dir} }

// GitDir is git run on the repository dir alone (`--git-dir=dir`, run in
// dir): ref updates and object import, which must not depend on a
// checked-out state.
func GitDir(dir string) Repo { return Repo{dir: dir, gitDir: true} }

// Dir is the directory the call runs in.
func (r Repo) Dir() string { return r.dir }

// args prefixes args with --git-dir for a GitDir.
func (r Repo) args(args ...string) []string {
	if !r.gitDir {
		return args
	}
	return append([]string{"--git-dir=" + r.dir}, args...)
}

func (g *Git) in(ctx context.Context, r Repo, stdin io.Reader, args ...string) ([]byte, error) {
	return g.output(ctx, r.dir, stdin, r.args(args...)...)
}

func (g *Git) lineIn(ctx context.Context, r Repo, args ...string) (string, error) {
	return g.line(ctx, r.dir, r.args(args...)...)
}

// logged prefixes args with core.logAllRefUpdates=always: a reflog for
// refs outside refs/heads too, so a tip lazaret moved stays reachable.
func logged(args ...string) []string {
	return append([]string{"-c", "core.logAllRefUpdates=always"}, args...)
}

// ---- repositories

// Init creates a repository with a working tree at dir (run in dir), no
// template, on branch, in objectFormat: `git init -q`.
func (g *Git) Init(ctx context.Context, dir, objectFormat, branch string) error {
	return g.run(ctx, dir, "init", "-q", "--template=", "--object-format="+objectFormat,
		"--initial-branch="+branch, dir)
}

// InitBare creates the bare repository gitDir (run in dir), no template,
// in objectFormat.
func (g *Git) InitBare(ctx context.Context, dir, gitDir, objectFormat string) error {
	return g.run(ctx, dir, "init", "-q", "--bare", "--template=", "--object-format="+objectFormat, gitDir)
}

// RepoPaths is `git rev-parse --path-format=absolute` of dir: five lines,
// whether it is bare, the top level, the git dir, the common dir and the
// object format.
func (g *Git) RepoPaths(ctx context.Context, dir string) ([]byte, error) {
	return g.output(ctx, dir, nil, "rev-parse", "--path-format=absolute",
		"--is-bare-repository", "--show-toplevel", "--git-dir", "--git-common-dir", "--show-object-format")
}

// ObjectFormat is the object format (sha1, sha256) of r.
func (g *Git) ObjectFormat(ctx context.Context, r Repo) (string, error) {
	return g.lineIn(ctx, r, "rev-parse", "--show-object-format")
}

// ---- revisions and refs

// VerifyCommit returns the commit rev names in r (`rev-parse -q --verify
// rev^{commit}`); an error when it names none.
func (g *Git) VerifyCommit(ctx context.Context, r Repo, rev string) (string, error) {
	return g.lineIn(ctx, r, "rev-parse", "-q", "--verify", rev+"^{commit}")
}

// SymbolicHead returns the full name of the branch HEAD points at in the
// working tree dir; an error when HEAD is detached.
func (g *Git) SymbolicHead(ctx context.Context, dir string) (string, error) {
	return g.line(ctx, dir, "symbolic-ref", "-q", "HEAD")
}

// ForEachRef lists the refs of r under patterns, one "<oid> <name>" line
// each.
func (g *Git) ForEachRef(ctx context.Context, r Repo, patterns ...string) (string, error) {
	return g.lineIn(ctx, r, append([]string{"for-each-ref", "--format=%(objectname) %(refname)"}, patterns...)...)
}

// WorktreeList is `git worktree list --porcelain` of r.
func (g *Git) WorktreeList(ctx context.Context, r Repo) (string, error) {
	return g.lineIn(ctx, r, "worktree", "list", "--porcelain")
}

// CreateRef creates ref at oid in the working tree dir's repository with
// reflog message msg; it fails when ref exists.
func (g *Git) CreateRef(ctx context.Context, dir, msg, ref, oid string) error {
	return g.run(ctx, dir, "update-ref", "-m", msg, ref, oid, "")
}

// CreateLoggedRef is CreateRef on r with a reflog whatever the ref's name
// (core.logAllRefUpdates=always).
func (g *Git) CreateLoggedRef(ctx context.Context, r Repo, msg, ref, oid string) error {
	_, err := g.lineIn(ctx, r, logged("update-ref", "-m", msg, ref, oid, "")...)
	return err
}

// UpdateRefs applies the `update-ref --stdin` transaction tx to r in one
// go, each ref with a reflog (core.logAllRefUpdates=always) of message msg.
func (g *Git) UpdateRefs(ctx context.Context, r Repo, msg string, tx io.Reader) error {
	_, err := g.in(ctx, r, tx, logged("update-ref", "-m", msg, "--stdin")...)
	return err
}

// MergeBase returns the best common ancestor of a and b in the working
// tree dir.
func (g *Git) MergeBase(ctx context.Context, dir, a, b string) (string, error) {
	return g.line(ctx, dir, "merge-base", a, b)
}

// IsAncestor reports whether a is an ancestor of b in the working tree
// dir (`merge-base --is-ancestor`: exit 1 is false, not an error).
func (g *Git) IsAncestor(ctx context.Context, dir, a, b string) (bool, error) {
	err := g.run(ctx, dir, "merge-base", "--is-ancestor", a, b)
	var ge *Error
	if errors.As(err, &ge) && ge.ExitCode == 1 {
		return false, nil
	}
	return err == nil, err
}

// RevListCount counts the commits reachable from tip and not from not
// (none when not is empty): `rev-list --count tip [--not not] --`.
func (g *Git) RevListCount(ctx context.Context, dir, tip, not string) (string, error) {
	args := []string{"rev-list", "--count", tip}
	if not != "" {
		args = append(args, "--not", not)
	}
	return g.line(ctx, dir, append(args, "--")...)
}

// RevListLeftRight is "<behind> <ahead>": the commits of left...right
// only left has, then only right (`rev-list --left-right --count`).
func (g *Git) RevListLeftRight(ctx context.Context, dir, left, right string) (string, error) {
	return g.line(ctx, dir, "rev-list", "--left-right", "--count", left+"..."+right, "--")
}

// NewCommits lists, at most max, the commits reachable from the tips
// (one per line on stdin) that no ref of r reaches.
func (g *Git) NewCommits(ctx context.Context, r Repo, max int, tips io.Reader) ([]byte, error) {
	return g.in(ctx, r, tips, "rev-list", fmt.Sprintf("--max-count=%d", max), "--stdin", "--not", "--all")
}

// CheckConnected fails unless every object reachable from the tips (one
// per line on stdin) is in r: the check git fetch runs after a pack.
func (g *Git) CheckConnected(ctx context.Context, r Repo, tips io.Reader) error {
	_, err := g.in(ctx, r, tips, "rev-list", "--objects", "--stdin", "--not", "--all", "--quiet")
	return err
}

// ---- objects

// CatFileBatch is `cat-file --batch` of the objects named on stdin (read
// it with ParseBatch).
func (g *Git) CatFileBatch(ctx context.Context, r Repo, names io.Reader) ([]byte, error) {
	return g.in(ctx, r, names, "cat-file", "--batch")
}

// CatFileTypes is the type of each object named on stdin, one per line.
func (g *Git) CatFileTypes(ctx context.Context, r Repo, names io.Reader) ([]byte, error) {
	return g.in(ctx, r, names, "cat-file", "--batch-check=%(objecttype)")
}

// IndexPack verifies the pack on stdin object by object
// (transfer.fsckObjects, --strict) and keeps it in r, completing thin
// deltas from r's objects.
func (g *Git) IndexPack(ctx context.Context, r Repo, pack io.Reader) error {
	_, err := g.in(ctx, r, pack, "-c", "transfer.fsckObjects=true", "index-pack", "--stdin", "--fix-thin", "--strict")
	return err
}

// LsTree is `ls-tree -r -z --full-tree` of commit in the working tree dir.
func (g *Git) LsTree(ctx context.Context, dir, commit string) ([]byte, error) {
	return g.output(ctx, dir, nil, "ls-tree", "-r", "-z", "--full-tree", commit)
}

// BundleCreate writes a bundle of refs (names as rev-parse takes them) to
// stdout, git's messages to stderr.
func (g *Git) BundleCreate(ctx context.Context, dir string, stdout, stderr io.Writer, refs ...string) error {
	return g.stream(ctx, dir, stdout, stderr, append([]string{"bundle", "create", "--quiet", "-"}, refs...)...)
}

// ---- index and working tree

// ListIndex is the index of the working tree dir, NUL-terminated
// `ls-files --stage` records.
func (g *Git) ListIndex(ctx context.Context, dir string) ([]byte, error) {
	return g.output(ctx, dir, nil, "ls-files", "-z", "--stage")
}

// ListUntracked lists, NUL-terminated, the files of the working tree dir
// that are neither tracked nor ignored.
func (g *Git) ListUntracked(ctx context.Context, dir string) ([]byte, error) {
	return g.output(ctx, dir, nil, "ls-files", "-z", "--others", "--exclude-standard")
}

// Status is `status --porcelain` of the working tree dir, submodules' own
// changes ignored, untracked files listed when untracked.
func (g *Git) Status(ctx context.Context, dir string, untracked bool) (string, error) {
	args := []string{"status", "--porcelain", "--ignore-submodules=dirty"}
	if !untracked {
		args = append(args, "--untracked-files=no")
	}
	return g.line(ctx, dir, args...)
}

// RefreshIndex refreshes the stat data of the index of dir
// (`update-index -q --refresh`).
func (g *Git) RefreshIndex(ctx context.Context, dir string) error {
	return g.run(ctx, dir, "update-index", "-q", "--refresh")
}

// Checkout checks out start in the working tree dir on branch, created
// or reset there, discarding what the tree holds (`checkout -q -f -B`).
func (g *Git) Checkout(ctx context.Context, dir, branch, start string) error {
	return g.run(ctx, dir, "checkout", "-q", "-f", "-B", branch, start)
}

// CheckoutDetached checks commit out, HEAD detached, into the working
// tree work of the repository gitDir (run in work).
func (g *Git) CheckoutDetached(ctx context.Context, gitDir, work, commit string) error {
	return g.run(ctx, work, "--git-dir="+gitDir, "--work-tree="+work, "checkout", "-q", "--detach", commit)
}

// ConflictedFiles lists the unmerged paths of dir, one per line.
func (g *Git) ConflictedFiles(ctx context.Context, dir string) (string, error) {
	return g.line(ctx, dir, "diff", "--name-only", "--diff-filter=U")
}

// ---- merging

// Merge merges commit into the branch checked out in dir with message msg,
// never running the pre-merge and commit-msg hooks (--no-verify; no hook
// runs anyway: core.hooksPath=/dev/null).
func (g *Git) Merge(ctx context.Context, dir, msg, commit string) error {
	_, err := g.output(ctx, dir, nil, "merge", "-q", "--no-edit", "--no-verify", "-m", msg, commit)
	return err
}

// MergeSquash stages the squashed changes of commit in dir, without
// committing them.
func (g *Git) MergeSquash(ctx context.Context, dir, commit string) error {
	_, err := g.output(ctx, dir, nil, "merge", "-q", "--squash", commit)
	return err
}

// Commit commits the index of dir with message msg, even when it changes
// nothing, without hooks.
func (g *Git) Commit(ctx context.Context, dir, msg string) error {
	_, err := g.output(ctx, dir, nil, "commit", "-q", "--no-verify", "--allow-empty", "-m", msg)
	return err
}

// MergeAbort is `merge --abort` in dir.
func (g *Git) MergeAbort(ctx context.Context, dir string) error {
	return g.run(ctx, dir, "merge", "--abort")
}

// ResetMerge is `reset -q --merge` in dir: undoes a squash merge.
func (g *Git) ResetMerge(ctx context.Context, dir string) error {
	return g.run(ctx, dir, "reset", "-q", "--merge")
}

// LogSubjects lists "* <subject>" of each commit reachable from tip and
// not from not.
func (g *Git) LogSubjects(ctx context.Context, dir, tip, not string) (string, error) {
	return g.line(ctx, dir, "log", "--format=* %s", tip, "--not", not)
}

// Subject is the subject line of commit oid in the working tree dir
// (the agent's text: the caller escapes it before showing it).
func (g *Git) Subject(ctx context.Context, dir, oid string) (string, error) {
	return g.line(ctx, dir, "log", "-1", "--format=%s", oid, "--")
}

// ---- configuration

// ConfigFileRegexp is `config --file file --null --get-regexp pattern` in
// dir: NUL-terminated "key\nvalue" records; exit 1 when nothing matches.
func (g *Git) ConfigFileRegexp(ctx context.Context, dir, file, pattern string) ([]byte, error) {
	return g.output(ctx, dir, nil, "config", "--file", file, "--null", "--get-regexp", pattern)
}

// ConfigScopedRegexp is `config --show-scope --null --get-regexp pattern`
// as git in dir reads its configuration: NUL-terminated scope and
// "key\nvalue" records; exit 1 when nothing matches.
func (g *Git) ConfigScopedRegexp(ctx context.Context, dir, pattern string) ([]byte, error) {
	return g.output(ctx, dir, nil, "config", "--show-scope", "--null", "--get-regexp", pattern)
}
