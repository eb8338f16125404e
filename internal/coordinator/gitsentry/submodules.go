package gitsentry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
)

// A submodule's repository on the host lives in the superproject's git dir
// (modules/<name>), which the sandbox sees read-only under
// /run/lazaret/host.git. The clone gets a repository of its own for each
// submodule the host has initialised, sharing the host's objects through
// alternates exactly as the superproject does, checked out at the commit
// the superproject records. Like the superproject, it is made by host git
// before any sandbox has seen the clone.

// gitlink is a submodule entry of the index: its path and recorded commit.
type gitlink struct{ path, oid string }

// populateSubmodules checks out, in the clone being made at dir, every
// submodule of the host that has a repository there. A submodule that
// cannot be populated stays an empty directory, with a notice saying why:
// the clone is still usable.
func populateSubmodules(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, dir string, notice func(string, ...any)) error {
	out, err := g.ListIndex(ctx, dir)
	if err != nil {
		return fmt.Errorf("listing submodules: %w", err)
	}
	links := parseGitlinks(out)
	if len(links) == 0 {
		return nil
	}
	names, err := submoduleNames(ctx, g, dir)
	if err != nil {
		return err
	}
	for _, l := range links {
		name, ok := names[l.path]
		if !ok {
			notice("submodule %s has no entry in .gitmodules; it is empty in the sandbox", l.path)
			continue
		}
		if !safeRelPath(name) || !safeRelPath(l.path) {
			notice("submodule %q at %q: name or path is not a plain relative path; it is empty in the sandbox", name, l.path)
			continue
		}
		hostDir := filepath.Join(repo.GitDir, "modules", name)
		if fi, err := os.Stat(hostDir); err != nil || !fi.IsDir() {
			notice("submodule %s is not initialised on the host (run `git submodule update --init` there); it is empty in the sandbox", l.path)
			continue
		}
		rel, err := filepath.Rel(repo.CommonDir, hostDir)
		if err != nil || !filepath.IsLocal(rel) {
			notice("submodule %s: its repository %s is outside %s; it is empty in the sandbox", l.path, hostDir, repo.CommonDir)
			continue
		}
		inside := ContainerHostGit + "/" + filepath.ToSlash(rel)
		if err := checkoutSubmodule(ctx, g, dir, name, l, hostDir, inside); err != nil {
			notice("submodule %s: %v; it is empty in the sandbox", l.path, err)
		}
	}
	return nil
}

// checkoutSubmodule makes <dir>/.git/modules/<name> and checks l out into
// <dir>/<l.path>. On failure it removes what it made.
func checkoutSubmodule(ctx context.Context, g *hostgit.Git, dir, name string, l gitlink, hostDir, inside string) (err error) {
	// Paths of the tree go through os.Root: the tree may come from the
	// agent's branch, and none of its paths may lead the host out of the
	// clone (through a symlinked parent, say).
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	gitDir := filepath.Join(dir, ".git", "modules", name)
	work := filepath.Join(dir, l.path)
	dotGit := filepath.Join(l.path, ".git")
	wroteDotGit := false
	defer func() {
		if err != nil {
			_ = os.RemoveAll(gitDir) // under .git/modules of a clone lazaret made
			if wroteDotGit {
				_ = root.Remove(dotGit)
			}
		}
	}()
	format, err := g.ObjectFormat(ctx, hostgit.GitDir(hostDir))
	if err != nil {
		return fmt.Errorf("reading the host repository: %w", err)
	}
	if err := g.InitBare(ctx, dir, gitDir, format); err != nil {
		return err
	}
	toWork, err := filepath.Rel(gitDir, work)
	if err != nil {
		return err
	}
	toGitDir, err := filepath.Rel(work, gitDir)
	if err != nil {
		return err
	}
	if err := root.MkdirAll(l.path, 0o755); err != nil {
		return err
	}
	f, err := root.OpenFile(dotGit, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	wroteDotGit = true
	_, werr := f.WriteString("gitdir: " + filepath.ToSlash(toGitDir) + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	// Host paths while lazaret checks out here; the sandbox's paths after.
	write := func(base string) error {
		alt := filepath.Join(gitDir, "objects", "info", "alternates")
		if err := os.MkdirAll(filepath.Dir(alt), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(alt, []byte(base+"/objects\n"), 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(gitDir, "config"), []byte(submoduleConfig(format, base+"/config", toWork)), 0o644)
	}
	if err := write(hostDir); err != nil {
		return err
	}
	if err := g.CheckoutDetached(ctx, gitDir, work, l.oid); err != nil {
		return fmt.Errorf("commit %s is not in the host's copy (run `git submodule update` there)", l.oid[:min(12, len(l.oid))])
	}
	return write(inside)
}

// submoduleConfig is the config of a submodule repository in the clone:
// the host's submodule config first (remote URL, the user's settings), then
// what makes it a checkout in the clone's tree.
func submoduleConfig(objectFormat, include, worktree string) string {
	var b strings.Builder
	b.WriteString("# Written by lazaret (Git Sentry).\n")
	writeRepositoryFormat(&b, objectFormat)
	fmt.Fprintf(&b, "[include]\n\tpath = %s\n", include)
	fmt.Fprintf(&b, "[core]\n\tbare = false\n\tworktree = %s\n", filepath.ToSlash(worktree))
	return b.String()
}

// parseGitlinks picks the submodule entries (mode 160000, stage 0) out of
// `git ls-files --stage -z`.
func parseGitlinks(out []byte) []gitlink {
	var links []gitlink
	for _, rec := range bytes.Split(out, []byte{0}) {
		meta, path, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok {
			continue
		}
		f := strings.Fields(string(meta))
		if len(f) != 3 || f[0] != "160000" || f[2] != "0" {
			continue
		}
		links = append(links, gitlink{path: string(path), oid: f[1]})
	}
	return links
}

// submoduleNames maps each submodule path of .gitmodules to its name.
func submoduleNames(ctx context.Context, g *hostgit.Git, dir string) (map[string]string, error) {
	if _, err := os.Lstat(filepath.Join(dir, ".gitmodules")); err != nil {
		return map[string]string{}, nil
	}
	out, err := g.ConfigFileRegexp(ctx, dir, ".gitmodules", `^submodule\..*\.path$`)
	if err != nil {
		if ge := (*hostgit.Error)(nil); errors.As(err, &ge) && ge.ExitCode == 1 { // no match
			return map[string]string{}, nil
		}
		return nil, fmt.Errorf("reading .gitmodules: %w", err)
	}
	return parseSubmodulePaths(out), nil
}

// parseSubmodulePaths reads `git config --null --get-regexp` output of
// submodule.<name>.path keys into path → name.
func parseSubmodulePaths(out []byte) map[string]string {
	names := map[string]string{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		key, path, ok := bytes.Cut(rec, []byte{'\n'})
		if !ok {
			continue
		}
		name, hasPrefix := strings.CutPrefix(string(key), "submodule.")
		name, hasSuffix := strings.CutSuffix(name, ".path")
		if hasPrefix && hasSuffix && name != "" {
			names[filepath.Clean(string(path))] = name
		}
	}
	return names
}

// safeRelPath reports whether p is a relative path that stays below the
// directory it is joined to (what git itself requires of submodule names)
// and has no .git component (in any case).
func safeRelPath(p string) bool {
	if p == "" || p == "." || !filepath.IsLocal(p) || strings.Contains(p, `\`) || filepath.Clean(p) != p {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if strings.EqualFold(c, ".git") {
			return false
		}
	}
	return true
}
