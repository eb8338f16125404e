package gitsentry

import (
	"os"
	"path/filepath"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
)

// gVisor mount hints (runsc/boot/mount_hints.go) name a mount by its
// source. Measured (docs/PERFORMANCE.md, "Git"): a share=container hint on a
// bind mount makes runsc put a sandbox-local overlay over it, so the
// agent's writes to the clone never reach the host and are lost at stop;
// lazaret therefore never sets one. What it does set is share=shared on the
// host's .git, which forces revalidating file access for that mount even
// when the runtime runs with --file-access-mounts=exclusive (the fast mode
// for the clone): the user changes the host .git at any time and the
// sandbox must see it (config include, alternates).
const hintPrefix = "dev.gvisor.spec.mount."

// Hint names (one per mount source; runsc refuses two hints with the
// same source).
const (
	HostGitHintName         = "lazarethostgit"   // branch mode: host common dir
	DirectWorkspaceHintName = "lazaretdirectws"  // direct mode: the host directory
	DirectGitHintName       = "lazaretdirectgit" // direct mode: its .git
)

// AddSharedHint marks the bind mount of source as shared with the host.
func AddSharedHint(spec *podman.ContainerSpec, name, source string) {
	if spec.Annotations == nil {
		spec.Annotations = map[string]string{}
	}
	spec.Annotations[hintPrefix+name+".source"] = source
	spec.Annotations[hintPrefix+name+".type"] = "bind"
	spec.Annotations[hintPrefix+name+".share"] = "shared"
}

// BranchMounts are the mounts of branch mode (DESIGN §6), in mount order:
// the clone read-write at /workspace; its .git as its own mount point so it
// cannot be renamed or replaced; a tmpfs over .git/hooks so no hook the
// agent writes persists; the lazaret config read-only over .git/config (a
// file mount: writes fail with EROFS, unlink and rename with EBUSY); the
// host's common dir read-only at /run/lazaret/host.git as a directory mount,
// so host-side atomic replacements (git config) are visible at once.
func BranchMounts(clone, configFile, hostCommonDir string) []podman.Mount {
	return []podman.Mount{
		{Type: "bind", Source: clone, Target: ContainerWorkspace, Options: []string{"z"}},
		{Type: "bind", Source: filepath.Join(clone, ".git"), Target: ContainerGitDir},
		{Type: "tmpfs", Target: ContainerHooks, Options: []string{"tmpfs-size=1m", "tmpfs-mode=755"}},
		{Type: "bind", Source: configFile, Target: ContainerConfig, ReadOnly: true},
		{Type: "bind", Source: hostCommonDir, Target: ContainerHostGit, ReadOnly: true},
	}
}

// DirectMounts are the mounts of direct mode beyond the workspace itself
// (the sandbox spec binds the host directory at /workspace): when the
// directory has a .git, it is mounted read-only as its own mount point, so
// git read commands work and writes fail cleanly. A .git file (a linked
// worktree or submodule) is mounted too, but the repository it points to
// is not: git inside then reports that it is not a repository.
func DirectMounts(workspace string) []podman.Mount {
	p := filepath.Join(workspace, ".git")
	fi, err := os.Lstat(p)
	if err != nil || !(fi.IsDir() || fi.Mode().IsRegular()) {
		return nil
	}
	return []podman.Mount{{Type: "bind", Source: p, Target: ContainerGitDir, ReadOnly: true}}
}
