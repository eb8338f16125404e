package gitsentry

import (
	"os"
	"path/filepath"

	"github.com/lazaret-dev/lazaret/internal/podman"
)

// gVisor mount hints (runsc/boot/mount_hints.go): a hint names a mount by
// its source; share=container makes runsc use exclusive file access for it
// (the sentry caches metadata instead of revalidating each lookup against
// the host). That is only correct for a mount nothing outside the sandbox
// changes while it runs: the agent clone and its .git (lazaret writes them
// only before the start, and reads them from the host side). Never for the
// host's .git, which the user changes at any time.
const hintPrefix = "dev.gvisor.spec.mount."

// exclusiveHint adds the annotations that make runsc mount source with
// exclusive access.
func exclusiveHint(spec *podman.ContainerSpec, name, source string) {
	if spec.Annotations == nil {
		spec.Annotations = map[string]string{}
	}
	spec.Annotations[hintPrefix+name+".source"] = source
	spec.Annotations[hintPrefix+name+".type"] = "bind"
	spec.Annotations[hintPrefix+name+".share"] = "container"
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

// AddExclusiveHints marks the clone mounts for exclusive file access.
func AddExclusiveHints(spec *podman.ContainerSpec, clone string) {
	exclusiveHint(spec, "lazaretws", clone)
	exclusiveHint(spec, "lazaretgit", filepath.Join(clone, ".git"))
}
