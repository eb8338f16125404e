package gitsentry

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// The vault keeps host git (run by the user, an IDE, a shell prompt) out of
// everything the agent writes. Whatever the agent puts in its clone
// (a commondir, a nested repository, a .git file pointing at a gitdir it
// wrote, a config that sets core.fsmonitor, gpg.program, a textconv …) is
// only dangerous if host git ever runs with a working directory inside the
// clone. So the clone lives one level down in a directory with mode 000:
//
//	<domain_root>/workspace/         the vault, mode 000, the user's own
//	<domain_root>/workspace/clone/   the agent clone, mounted at /workspace
//
// No process of the user can search the vault (no chdir, no open below it,
// no listing), so git discovery never starts inside the clone and nothing
// the agent wrote is ever read by a host git the user runs, whatever the
// plant. Measured with rootless podman: the container's root maps to the
// user's own uid, so files the agent makes are the user's and git's
// safe.directory ownership check does not stop anything; a mode-000
// directory does, and podman and runsc, running as root of the user
// namespace (CAP_DAC_OVERRIDE over the user's files there), still bind
// mount the clone from below it.
//
// Lazaret itself reaches the clone through a directory descriptor opened
// while the vault is briefly searchable (mode 100: search, no listing; a
// few microseconds at each sandbox start, before the container runs), and
// then works below /proc/self/fd/<n>, which the kernel resolves without
// checking the vault's permissions again.

// cloneDirName is the clone's name inside the vault.
const cloneDirName = "clone"

// ClonePath is the agent clone of a domain: the mount source of /workspace.
// The user's processes cannot reach it (the vault, a.AgentClone(), has
// mode 000); lazaret opens it with OpenClone.
func ClonePath(a *domain.Anchor) string {
	return filepath.Join(a.AgentClone(), cloneDirName)
}

// Clone is the agent clone opened through the vault.
type Clone struct {
	d *vault.Dir
}

// Path names the clone directory through the open descriptor; paths below
// it resolve without searching the vault.
func (c *Clone) Path() string { return c.d.Path() }

// Close releases the descriptor.
func (c *Clone) Close() error { return c.d.Close() }

// sealVault makes sure the vault v exists as a real directory of ours with
// mode 000. A vault a user opened up (chmod) is closed again. A vault that
// still is the clone itself (the layout before the vault: v/.git) is moved
// into a new vault as v/clone.
func sealVault(v string) error {
	fi, err := os.Lstat(v)
	if err == nil && fi.IsDir() && fi.Mode().Perm() != 0 {
		if _, err := os.Lstat(filepath.Join(v, ".git")); err == nil {
			if err := vault.Check(v, fi); err != nil {
				return err
			}
			return migrateLegacyClone(v)
		}
	}
	return vault.Seal(v)
}

// migrateLegacyClone moves a clone that sits directly at v (made before
// the vault existed) into a new vault at v.
func migrateLegacyClone(v string) error {
	old := filepath.Join(filepath.Dir(v), ".workspace.legacy-"+randomSuffix())
	if err := os.Rename(v, old); err != nil {
		return fmt.Errorf("moving the agent clone into its vault: %w", err)
	}
	if err := os.Mkdir(v, 0); err != nil {
		return fmt.Errorf("creating the agent vault %s: %w", v, err)
	}
	return adoptClone(v, old)
}

// adoptClone renames dir (a clone built or kept outside the vault) to
// v/clone. The vault is writable (mode 300, still not listable) only for
// the rename.
func adoptClone(v, dir string) error {
	return vault.Rename(v, dir, cloneDirName)
}

// OpenClone opens the clone in vault v; fs.ErrNotExist when there is none.
// The clone directory itself must be a directory (never a symlink).
func OpenClone(v string) (*Clone, error) {
	d, err := vault.Open(v, cloneDirName, false, 0)
	if err != nil {
		return nil, err
	}
	return &Clone{d: d}, nil
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
