package gitsentry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/atomicfile"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// Paths inside the sandbox.
const (
	ContainerWorkspace = domain.SandboxWorkspace
	ContainerGitDir    = "/workspace/.git"
	ContainerHooks     = "/workspace/.git/hooks"
	ContainerConfig    = "/workspace/.git/config"
	ContainerHostGit   = "/run/lazaret/host.git"
)

// ConfigFile is the lazaret-written git config of a domain's clone. It
// lives outside the clone (the agent can write the clone's .git on the
// host side) and is mounted read-only over /workspace/.git/config.
func ConfigFile(domainRoot string) string {
	return filepath.Join(domainRoot, "gitsentry", "config")
}

// cloneConfig is the git config of the agent clone. The repository format
// must be in this file itself (git reads it without following includes);
// the host repository's config comes through the include, so a host-side
// `git config` is seen in the sandbox at once. Settings after the include
// win over the host's.
func cloneConfig(objectFormat, include string) string {
	var b strings.Builder
	b.WriteString("# Written by lazaret (Git Sentry); read-only in the sandbox.\n")
	writeRepositoryFormat(&b, objectFormat)
	b.WriteString("[core]\n\tfilemode = true\n\tlogallrefupdates = true\n")
	fmt.Fprintf(&b, "[include]\n\tpath = %s\n", include)
	// The clone has a working tree whatever the host's core.bare says.
	// The untracked cache spares git status a readdir of every directory,
	// which costs a trip into gVisor each (docs/PERFORMANCE.md, "Git";
	// `git update-index --test-untracked-cache` passes under runsc).
	b.WriteString("[core]\n\tbare = false\n\tuntrackedCache = true\n")
	return b.String()
}

// writeRepositoryFormat writes the repository format settings, which git
// reads from a repository's own config file only (never through includes).
func writeRepositoryFormat(b *strings.Builder, objectFormat string) {
	if objectFormat == "sha256" {
		b.WriteString("[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n")
		return
	}
	b.WriteString("[core]\n\trepositoryformatversion = 0\n")
}

// buildClone makes the agent clone on m's agent branch, checked out at start,
// sharing the host's objects, in a new temporary directory under parent,
// and returns that directory (the caller moves it into the vault). A
// failure leaves nothing behind. This is the only time host git runs in
// the clone: before any sandbox has seen it, while its .git holds only
// what lazaret wrote and its tree only a commit the host has verified
// (which cannot hold a .git entry: index-pack --strict). Submodules the
// host has initialised are checked out too (submodules.go); notice
// reports the ones that stay empty. The agent's side branches the host
// keeps are recreated (sidebranch.go).
func buildClone(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, parent string, m gitrepo.RefMap, start string, notice func(string, ...any)) (dir string, err error) {
	branch := m.AgentBranch()
	tmp, err := os.MkdirTemp(parent, ".workspace.new-")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := g.Init(ctx, tmp, repo.ObjectFormat, branch); err != nil {
		return "", fmt.Errorf("creating the agent clone: %w", err)
	}
	gitDir := filepath.Join(tmp, ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "objects", "info"), 0o755); err != nil {
		return "", err
	}
	alt := filepath.Join(gitDir, "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(filepath.Join(repo.CommonDir, "objects")+"\n"), 0o644); err != nil {
		return "", err
	}
	// While lazaret checks out on the host, include the host config by its
	// host path so the checkout honours the user's settings (autocrlf,
	// filters they configured) exactly as their own checkout would.
	cfg := filepath.Join(gitDir, "config")
	if err := os.WriteFile(cfg, []byte(cloneConfig(repo.ObjectFormat, filepath.Join(repo.CommonDir, "config"))), 0o644); err != nil {
		return "", err
	}
	if err := g.Checkout(ctx, tmp, branch, start); err != nil {
		return "", fmt.Errorf("checking out %s in the agent clone: %w", start, err)
	}
	recreateSideBranches(ctx, g, repo, m, tmp, notice)
	if err := populateSubmodules(ctx, g, repo, tmp, notice); err != nil {
		return "", fmt.Errorf("submodules of the agent clone: %w", err)
	}
	if err := os.WriteFile(alt, []byte(ContainerHostGit+"/objects\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(cfg, []byte(cloneConfig(repo.ObjectFormat, ContainerHostGit+"/config")), 0o644); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(gitDir, "hooks"), 0o755); err != nil {
		return "", err
	}
	return tmp, nil
}

// RepairClone makes an existing clone fit to be mounted again, touching it
// only through plain file operations confined to its .git (os.Root): the
// agent had write access to it, so host git never runs there. clone is a
// path that reaches the clone (Clone.Path). It restores
// the alternates, and makes sure the mount targets (hooks/, config) are a
// real directory and a real file, not symlinks the agent left behind.
func RepairClone(clone string) error {
	gitDir := filepath.Join(clone, ".git")
	fi, err := os.Lstat(gitDir)
	if err != nil {
		return fmt.Errorf("agent clone %s: %w", clone, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("agent clone %s: .git is not a directory", clone)
	}
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := ensureDir(root, "hooks"); err != nil {
		return err
	}
	if err := ensureDir(root, "objects/info"); err != nil {
		return err
	}
	if err := replaceFile(root, "objects/info/alternates", ContainerHostGit+"/objects\n"); err != nil {
		return err
	}
	fi, err = root.Lstat("config")
	if err != nil || !fi.Mode().IsRegular() {
		if err := replaceFile(root, "config", ""); err != nil {
			return err
		}
	}
	return nil
}

func ensureDir(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		if err := root.RemoveAll(name); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return root.MkdirAll(name, 0o755)
}

// replaceFile writes a new file at name: an existing entry (possibly a
// symlink the agent planted) is removed first, and O_EXCL makes sure what
// is written is the new file itself.
func replaceFile(root *os.Root, name, content string) error {
	if err := root.RemoveAll(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteConfigFile writes the read-only config source of a domain
// atomically. It must not run while a sandbox has it mounted (a rename
// over a bind-mounted file detaches the mount inside the container).
func WriteConfigFile(domainRoot, objectFormat string) (string, error) {
	path := ConfigFile(domainRoot)
	return path, writeMountedFile(path, cloneConfig(objectFormat, ContainerHostGit+"/config"))
}

// writeMountedFile replaces path (a file lazaret mounts read-only into the
// sandbox) with content, by rename, so a mount never sees half a file.
func writeMountedFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(content), 0o444)
}

// recreateSideBranches creates, in a clone being built (before any
// sandbox has seen it), the branches the host keeps for the agent, so
// that the ref sync (which mirrors deletions) does not drop them when the
// clone was rebuilt, after reset-branch or a lost clone. One update-ref
// each: a name the clone cannot hold is reported and skipped, not fatal.
func recreateSideBranches(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, m gitrepo.RefMap, dir string, notice func(string, ...any)) {
	bs, err := gitrepo.ListSideBranches(ctx, g, repo, m)
	if err != nil {
		notice("side branches not recreated in the agent clone: %v", err)
		return
	}
	for _, b := range bs {
		if gitrepo.ValidBranch(b.Name) != nil || b.Name == m.AgentBranch() {
			continue
		}
		if err := g.CreateRef(ctx, dir, "lazaret: kept side branch", "refs/heads/"+b.Name, b.Tip); err != nil {
			notice("side branch %s not recreated in the agent clone (kept on the host as %s): %v", visible.Line(b.Name), visible.Line(b.Ref), err)
		}
	}
}
