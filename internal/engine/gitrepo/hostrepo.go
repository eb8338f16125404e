// Package gitrepo is what the CLI and the coordinator both know of the
// user's host repository: opening it with the hardened host git, the Git
// Sentry mode of a workspace, the lazaret ref names of a profile (agent
// branch, side branches, kept tips), the side branches themselves and the
// refs the last sync skipped.
package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
)

// Errors of host repository discovery; internal/cli turns them into
// messages with hints.
var (
	// ErrNotRepository: the workspace is not the top level of a git
	// repository (branch mode needs one).
	ErrNotRepository = errors.New("not the top level of a git repository")
	// ErrNoCommits: the repository has no commit yet, so there is nothing
	// to start the agent branch from.
	ErrNoCommits = errors.New("the repository has no commits yet")
	// ErrBareRepository: a bare repository has no working tree to clone.
	ErrBareRepository = errors.New("bare repository")
)

// HostRepo is the user's repository as host git sees it. Every path is
// absolute and canonical.
type HostRepo struct {
	// TopLevel is the working tree (the workspace).
	TopLevel string
	// GitDir is the repository directory of this working tree: TopLevel/.git,
	// or <common>/worktrees/<name> for a linked worktree.
	GitDir string
	// CommonDir holds objects, refs and config; it is what lazaret mounts
	// read-only at /run/lazaret/host.git. Equal to GitDir except for linked
	// worktrees (and submodule checkouts, whose GitDir is under the
	// superproject's .git/modules).
	CommonDir string
	// ObjectFormat is "sha1" or "sha256".
	ObjectFormat string
}

// HasGitEntry reports whether dir has a .git entry (directory, or a file
// pointing elsewhere as in worktrees and submodules). It does not run git.
func HasGitEntry(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, ".git"))
	return err == nil && (fi.IsDir() || fi.Mode().IsRegular())
}

// OpenHostRepo inspects the repository whose top level is workspace.
// Discovery never walks above workspace (GIT_CEILING_DIRECTORIES), so a
// .git planted in a parent directory is never used.
func OpenHostRepo(ctx context.Context, g *hostgit.Git, workspace string) (*HostRepo, error) {
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	if !HasGitEntry(ws) {
		return nil, fmt.Errorf("%s: %w", ws, ErrNotRepository)
	}
	out, err := g.RepoPaths(ctx, ws)
	if err != nil {
		var ge *hostgit.Error
		stderr := ""
		if errors.As(err, &ge) {
			stderr = strings.TrimSpace(ge.Stderr)
		}
		return nil, fmt.Errorf("%s: %w: %s", ws, ErrNotRepository, stderr)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 5 {
		return nil, fmt.Errorf("%s: unexpected `git rev-parse` output %q", ws, out)
	}
	if lines[0] == "true" {
		return nil, fmt.Errorf("%s: %w", ws, ErrBareRepository)
	}
	r := &HostRepo{ObjectFormat: lines[4]}
	for i, p := range []*string{&r.TopLevel, &r.GitDir, &r.CommonDir} {
		real, err := filepath.EvalSymlinks(lines[i+1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lines[i+1], err)
		}
		*p = real
	}
	if r.TopLevel != ws {
		return nil, fmt.Errorf("%s is inside the repository %s, not its top level: %w", ws, r.TopLevel, ErrNotRepository)
	}
	if r.ObjectFormat != "sha1" && r.ObjectFormat != "sha256" {
		return nil, fmt.Errorf("%s: unknown object format %q", ws, r.ObjectFormat)
	}
	return r, nil
}

// Work is the working tree, where host git runs for what depends on the
// checked-out state.
func (r *HostRepo) Work() hostgit.Repo { return hostgit.WorkTree(r.TopLevel) }

// Common is the common dir alone (no working tree): ref updates and object
// import, which must not depend on the checked-out state.
func (r *HostRepo) Common() hostgit.Repo { return hostgit.GitDir(r.CommonDir) }

// Head returns the commit HEAD points at, or ErrNoCommits.
func (r *HostRepo) Head(ctx context.Context, g *hostgit.Git) (string, error) {
	oid, err := g.VerifyCommit(ctx, r.Work(), "HEAD")
	if err != nil || oid == "" {
		return "", fmt.Errorf("%s: %w", r.TopLevel, ErrNoCommits)
	}
	return oid, nil
}

// Branch returns the full name of the checked-out branch, or "" when HEAD
// is detached.
func (r *HostRepo) Branch(ctx context.Context, g *hostgit.Git) string {
	b, err := g.SymbolicHead(ctx, r.TopLevel)
	if err != nil {
		return ""
	}
	return b
}

// ResolveRef returns the object a full ref name points at, or "" if the
// ref does not exist.
func (r *HostRepo) ResolveRef(ctx context.Context, g *hostgit.Git, ref string) string {
	oid, err := g.VerifyCommit(ctx, r.Common(), ref)
	if err != nil {
		return ""
	}
	return oid
}

// Dirty returns `git status --porcelain` of tracked and untracked files
// (empty when clean). It is run only in the user's own working tree.
func (r *HostRepo) Dirty(ctx context.Context, g *hostgit.Git, untracked bool) (string, error) {
	return g.Status(ctx, r.TopLevel, untracked)
}

// CheckedOutBranches returns the full branch names checked out in any
// worktree of the repository; the ref sync never moves one of those (that
// would change a working tree's HEAD under the user).
func (r *HostRepo) CheckedOutBranches(ctx context.Context, g *hostgit.Git) (map[string]bool, error) {
	out, err := g.WorktreeList(ctx, r.Common())
	if err != nil {
		return nil, err
	}
	m := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if b, ok := strings.CutPrefix(l, "branch "); ok {
			m[b] = true
		}
	}
	return m, nil
}

// OIDLen is the hex length of object names in this repository.
func (r *HostRepo) OIDLen() int {
	if r.ObjectFormat == "sha256" {
		return 64
	}
	return 40
}
