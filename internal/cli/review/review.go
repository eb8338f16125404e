// Package review is the CLI's review of the agent's work on the host:
// diff, log, merge and reset-branch over the hardened host git, the review
// flags (external symlinks, executables, autorun files) and the rendering
// that shows sandbox-written text safely (sanitize.go).
package review

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/adapter/overlayfs"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
)

// Errors of the review commands; internal/cli adds the hints.
var (
	ErrNoAgentBranch  = errors.New("no agent branch yet")
	ErrDetachedHead   = errors.New("the host repository has a detached HEAD")
	ErrDirtyTree      = errors.New("the host working tree has uncommitted changes")
	ErrOperationInPrg = errors.New("a merge, rebase or cherry-pick is in progress in the host repository")
	ErrMergeConflict  = errors.New("the agent branch does not merge cleanly")
	ErrSandboxRunning = errors.New("the sandbox is running")
	// ErrExternalSymlinks: the merge would create symlinks that lead out
	// of the repository, and the user did not allow them.
	ErrExternalSymlinks = errors.New("the agent branch adds symlinks that lead out of the repository")
)

// Review runs the host-side review commands on the user's repository. All
// of them run host git in the user's own working tree and repository,
// never in the agent clone; the agent's work is only ever read as the
// verified objects behind refs/heads/lazaret/agent-<p>.
type Review struct {
	Git  *hostgit.Git
	Repo *gitrepo.HostRepo
	Map  gitrepo.RefMap
	// AllowExternalSymlinks lets Merge create symlinks that lead out of
	// the repository (--allow-external-symlinks).
	AllowExternalSymlinks bool

	savedIndex []byte // the index before a merge, restored if it fails
}

// agentTip returns the agent branch's commit on the host.
func (r *Review) agentTip(ctx context.Context) (string, error) {
	tip := r.Repo.ResolveRef(ctx, r.Git, r.Map.AgentRef())
	if tip == "" {
		return "", fmt.Errorf("%s: %w", r.Map.AgentBranch(), ErrNoAgentBranch)
	}
	return tip, nil
}

// streamView runs a host git view (run, in the working tree) with its
// output, of kind, rendered for view on out and errOut.
func (r *Review) streamView(out, errOut io.Writer, view View, kind outputKind, run func(stdout, stderr io.Writer) error) error {
	stdout, stderr, closeStreams := viewStreams(out, errOut, view, kind)
	err := run(stdout, stderr)
	if cerr := closeStreams(); err == nil && cerr != nil {
		return cerr
	}
	return err
}

// streamLog shows the log of the commits reachable from tip and not
// from not ("": all), rendered for view.
func (r *Review) streamLog(ctx context.Context, out, errOut io.Writer, view View, oneline bool, tip, not string) error {
	return r.streamView(out, errOut, view, logKind(oneline), func(stdout, stderr io.Writer) error {
		return r.Git.StreamLog(ctx, r.Repo.TopLevel, stdout, stderr, hostgit.LogView{Oneline: oneline}, tip, not)
	})
}

// forkPoint returns the agent tip and its merge base with HEAD.
func (r *Review) forkPoint(ctx context.Context) (tip, base string, err error) {
	tip, err = r.agentTip(ctx)
	if err != nil {
		return "", "", err
	}
	head, err := r.Repo.Head(ctx, r.Git)
	if err != nil {
		return "", "", err
	}
	base, err = r.Git.MergeBase(ctx, r.Repo.TopLevel, head, tip)
	if err != nil {
		return "", "", fmt.Errorf("no common history between HEAD and %s: %w", r.Map.AgentBranch(), err)
	}
	return tip, base, nil
}

// Diff shows what the agent changed since it forked from the host's
// current history: git diff <merge-base>..<agent tip>, rendered for view
// (sanitize.go).
func (r *Review) Diff(ctx context.Context, out, errOut io.Writer, stat bool, view View) error {
	tip, base, err := r.forkPoint(ctx)
	if err != nil {
		return err
	}
	kind := kindPatch
	if stat {
		kind = kindText
	}
	return r.streamView(out, errOut, view, kind, func(stdout, stderr io.Writer) error {
		return r.Git.StreamDiff(ctx, r.Repo.TopLevel, stdout, stderr, diffView(view, stat), base, tip)
	})
}

// Log lists the agent's commits that the host's HEAD does not have,
// rendered for view (sanitize.go).
func (r *Review) Log(ctx context.Context, out, errOut io.Writer, oneline bool, view View) error {
	tip, err := r.agentTip(ctx)
	if err != nil {
		return err
	}
	head, _ := r.Repo.Head(ctx, r.Git)
	return r.streamLog(ctx, out, errOut, view, oneline, tip, head)
}

// MergeResult says what Merge did.
type MergeResult struct {
	Branch   string // host branch merged into
	Before   string
	After    string
	UpToDate bool
	// Flags is what the merge planted (Review.Flags before it ran).
	Flags []Flag
}

// checkClean refuses a merge on a working tree with changes to tracked
// files or an operation in progress.
func (r *Review) checkClean(ctx context.Context) error {
	for _, f := range []string{"MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply"} {
		if _, err := os.Lstat(filepath.Join(r.Repo.GitDir, f)); err == nil {
			return ErrOperationInPrg
		}
	}
	_ = r.Git.RefreshIndex(ctx, r.Repo.TopLevel)
	dirty, err := r.Repo.Dirty(ctx, r.Git, false)
	if err != nil {
		return err
	}
	if dirty != "" {
		lines := strings.Split(dirty, "\n")
		if len(lines) > 5 {
			lines = append(lines[:5], "...")
		}
		return fmt.Errorf("%w: %s", ErrDirtyTree, strings.Join(lines, "; "))
	}
	return nil
}

// Merge merges the agent branch into the host's current branch with host
// git (hooks off: the merged tree is the agent's, and a hook may run code
// from it). On a conflict or any failure it aborts, and the repository is
// left as it was.
func (r *Review) Merge(ctx context.Context, squash bool) (*MergeResult, error) {
	branch := r.Repo.Branch(ctx, r.Git)
	if branch == "" {
		return nil, ErrDetachedHead
	}
	if branch == r.Map.AgentRef() {
		return nil, fmt.Errorf("the host has %s itself checked out; check out the branch to merge into", r.Map.AgentBranch())
	}
	tip, err := r.agentTip(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.checkClean(ctx); err != nil {
		return nil, err
	}
	before, err := r.Repo.Head(ctx, r.Git)
	if err != nil {
		return nil, err
	}
	// A failed merge is undone by git, but git rewrites the index on the
	// way (same entries, new stat data); the saved bytes are put back so
	// the repository is exactly as it was.
	index, _ := os.ReadFile(filepath.Join(r.Repo.GitDir, "index"))
	r.savedIndex = index
	defer func() { r.savedIndex = nil }()
	res := &MergeResult{Branch: strings.TrimPrefix(branch, "refs/heads/"), Before: before}
	if ok, _ := r.isAncestor(ctx, tip, before); ok {
		res.After, res.UpToDate = before, true
		return res, nil
	}
	if res.Flags, err = r.Flags(ctx); err != nil {
		return nil, fmt.Errorf("reviewing what the merge would plant: %w", err)
	}
	if ext := ExternalSymlinks(res.Flags); len(ext) > 0 && !r.AllowExternalSymlinks {
		return res, &ExternalSymlinkError{Links: ext}
	}
	if squash {
		err = r.squash(ctx, tip)
	} else {
		err = r.Git.Merge(ctx, r.Repo.TopLevel, "Merge agent branch "+r.Map.AgentBranch(), tip)
		if err != nil {
			err = r.abort(ctx, before, err, false)
		}
	}
	if err != nil {
		return nil, err
	}
	res.After, _ = r.Repo.Head(ctx, r.Git)
	return res, nil
}

// ExternalSymlinkError names the symlinks a refused merge would create.
type ExternalSymlinkError struct{ Links []Flag }

func (e *ExternalSymlinkError) Error() string {
	return fmt.Sprintf("%v (%d)", ErrExternalSymlinks, len(e.Links))
}

func (e *ExternalSymlinkError) Unwrap() error { return ErrExternalSymlinks }

func (r *Review) isAncestor(ctx context.Context, a, b string) (bool, error) {
	return r.Git.IsAncestor(ctx, r.Repo.TopLevel, a, b)
}

func (r *Review) squash(ctx context.Context, tip string) error {
	before, _ := r.Repo.Head(ctx, r.Git)
	if err := r.Git.MergeSquash(ctx, r.Repo.TopLevel, tip); err != nil {
		return r.abort(ctx, before, err, true)
	}
	subjects, _ := r.Git.LogSubjects(ctx, r.Repo.TopLevel, tip, before)
	msg := "Squashed agent branch " + r.Map.AgentBranch() + "\n\n" + subjects + "\n"
	if err := r.Git.Commit(ctx, r.Repo.TopLevel, msg); err != nil {
		return r.abort(ctx, before, err, true)
	}
	return nil
}

// abort undoes a failed merge. The tree was clean before (checkClean), so
// `merge --abort` / `reset --merge` restore it exactly; HEAD is checked.
func (r *Review) abort(ctx context.Context, before string, cause error, squash bool) error {
	conflicts, _ := r.Git.ConflictedFiles(ctx, r.Repo.TopLevel)
	var aerr error
	if _, err := os.Lstat(filepath.Join(r.Repo.GitDir, "MERGE_HEAD")); err == nil && !squash {
		aerr = r.Git.MergeAbort(ctx, r.Repo.TopLevel)
	} else {
		aerr = r.Git.ResetMerge(ctx, r.Repo.TopLevel)
	}
	_ = os.Remove(filepath.Join(r.Repo.GitDir, "SQUASH_MSG"))
	if now, _ := r.Repo.Head(ctx, r.Git); now != before || aerr != nil {
		return fmt.Errorf("merge failed (%v) and restoring the repository failed too (HEAD %s, was %s): %v", cause, now, before, aerr)
	}
	if dirty, err := r.Repo.Dirty(ctx, r.Git, false); err == nil && dirty == "" && r.savedIndex != nil {
		r.restoreIndex()
	}
	if conflicts != "" {
		return fmt.Errorf("%w (conflicts in %s); the merge was aborted and the repository left as it was",
			ErrMergeConflict, strings.ReplaceAll(conflicts, "\n", ", "))
	}
	return fmt.Errorf("merge failed, repository left as it was: %w", cause)
}

// restoreIndex puts the saved index bytes back (atomically, by rename).
func (r *Review) restoreIndex() {
	path := filepath.Join(r.Repo.GitDir, "index")
	tmp := path + ".lazaret-restore"
	if err := os.WriteFile(tmp, r.savedIndex, 0o644); err != nil {
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
	}
}

// SandboxRunning reports whether the domain's container is running.
func SandboxRunning(ctx context.Context, pc *podman.Client, container string) (bool, error) {
	info, err := pc.InspectContainer(ctx, container)
	if err != nil {
		if errors.Is(err, podman.ErrNoSuchContainer) {
			return false, nil
		}
		return false, err
	}
	return info.State.Running, nil
}

// ResetResult says what ResetBranch did.
type ResetResult struct {
	OldTip string // "" when there was no agent branch
	KeptAs string // ref keeping the old tip, "" when nothing needed keeping
	NewTip string
	// Side are the agent's side branches kept on the host (the next
	// start recreates them in the new clone).
	Side []gitrepo.SideBranch
}

// ResetBranch starts the agent over from the host's current commit: the
// old tip is kept as refs/lazaret/<p>/old/<timestamp>, the host agent
// branch moves to HEAD, and the agent clone is removed so the next start
// builds a fresh one from there (with the side branches, which stay on
// the host untouched). It refuses while the sandbox runs.
func ResetBranch(ctx context.Context, g *hostgit.Git, pc *podman.Client, repo *gitrepo.HostRepo, a *domain.Anchor, now time.Time) (*ResetResult, error) {
	running, err := SandboxRunning(ctx, pc, a.Container())
	if err != nil {
		return nil, err
	}
	if running {
		return nil, fmt.Errorf("%s: %w", a.Container(), ErrSandboxRunning)
	}
	m := gitrepo.RefMapOf(a)
	head, err := repo.Head(ctx, g)
	if err != nil {
		return nil, err
	}
	res := &ResetResult{OldTip: repo.ResolveRef(ctx, g, m.AgentRef()), NewTip: head}
	if res.Side, err = gitrepo.ListSideBranches(ctx, g, repo, m); err != nil {
		return nil, err
	}
	var tx strings.Builder
	if res.OldTip != "" && res.OldTip != head {
		res.KeptAs = m.OldRefPrefix() + now.UTC().Format("20060102T150405.000Z")
		fmt.Fprintf(&tx, "create %s %s\n", res.KeptAs, res.OldTip)
	}
	if res.OldTip == "" {
		fmt.Fprintf(&tx, "create %s %s\n", m.AgentRef(), head)
	} else {
		fmt.Fprintf(&tx, "update %s %s %s\n", m.AgentRef(), head, res.OldTip)
	}
	if err := g.UpdateRefs(ctx, repo.Common(), "lazaret: reset-branch", strings.NewReader(tx.String())); err != nil {
		return nil, fmt.Errorf("moving %s: %w", m.AgentBranch(), err)
	}
	if err := removeClone(ctx, pc, a, now); err != nil {
		return res, err
	}
	return res, nil
}

// removeClone moves the clone aside (atomic: the next start sees either
// the old clone or none) and deletes it inside the user namespace, where
// files the sandbox created under other uids can be removed.
func removeClone(ctx context.Context, pc *podman.Client, a *domain.Anchor, now time.Time) error {
	clone := a.AgentClone()
	trash := filepath.Join(a.Root(), ".workspace.old-"+now.UTC().Format("20060102T150405.000Z"))
	if err := os.Rename(clone, trash); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("moving the agent clone aside: %w", err)
	}
	if err := os.RemoveAll(trash); err == nil {
		return nil
	}
	if err := overlayfs.New(pc).RemoveAll(ctx, trash); err != nil {
		return fmt.Errorf("removing the old agent clone %s: %w", trash, err)
	}
	return nil
}

// DiffAgainst shows what this agent branch changes against other's
// (`lazaret attempts diff A B`: B's against A's): git diff <A tip>..<B
// tip>, rendered for view like Diff.
func (r *Review) DiffAgainst(ctx context.Context, other gitrepo.RefMap, out, errOut io.Writer, stat bool, view View) error {
	tip, err := r.agentTip(ctx)
	if err != nil {
		return err
	}
	base := r.Repo.ResolveRef(ctx, r.Git, other.AgentRef())
	if base == "" {
		return fmt.Errorf("%s: %w", other.AgentBranch(), ErrNoAgentBranch)
	}
	kind := kindPatch
	if stat {
		kind = kindText
	}
	return r.streamView(out, errOut, view, kind, func(stdout, stderr io.Writer) error {
		return r.Git.StreamDiff(ctx, r.Repo.TopLevel, stdout, stderr, diffView(view, stat), base, tip)
	})
}
