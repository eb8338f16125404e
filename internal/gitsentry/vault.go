package gitsentry

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/domain"
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
	f *os.File
}

// Path names the clone directory through the open descriptor; paths below
// it resolve without searching the vault.
func (c *Clone) Path() string { return "/proc/self/fd/" + strconv.Itoa(int(c.f.Fd())) }

// Close releases the descriptor.
func (c *Clone) Close() error { return c.f.Close() }

// sealVault makes sure the vault v exists as a real directory of ours with
// mode 000. A vault a user opened up (chmod) is closed again. A vault that
// still is the clone itself (the layout before the vault: v/.git) is moved
// into a new vault as v/clone.
func sealVault(v string) error {
	fi, err := os.Lstat(v)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(v, 0); err != nil {
			return fmt.Errorf("creating the agent vault %s: %w", v, err)
		}
		return os.Chmod(v, 0)
	}
	if err != nil {
		return fmt.Errorf("agent vault %s: %w", v, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("agent vault %s: not a directory", v)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("agent vault %s: owned by uid %d, not by you", v, st.Uid)
	}
	if fi.Mode().Perm() == 0 {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(v, ".git")); err == nil {
		return migrateLegacyClone(v)
	}
	return os.Chmod(v, 0)
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
	return withVaultMode(v, 0o300, func() error {
		return os.Rename(dir, filepath.Join(v, cloneDirName))
	})
}

// withVaultMode runs fn with the vault at mode and closes it again (mode
// 000) whatever fn returned.
func withVaultMode(v string, mode os.FileMode, fn func() error) error {
	if err := os.Chmod(v, mode); err != nil {
		return fmt.Errorf("agent vault %s: %w", v, err)
	}
	err := fn()
	if cerr := os.Chmod(v, 0); cerr != nil && err == nil {
		err = fmt.Errorf("closing the agent vault %s: %w", v, cerr)
	}
	return err
}

// OpenClone opens the clone in vault v; fs.ErrNotExist when there is none.
// The clone directory itself must be a directory (never a symlink).
func OpenClone(v string) (*Clone, error) {
	var f *os.File
	err := withVaultMode(v, 0o100, func() error {
		fd, err := unix.Open(filepath.Join(v, cloneDirName), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &fs.PathError{Op: "open", Path: filepath.Join(v, cloneDirName), Err: err}
		}
		f = os.NewFile(uintptr(fd), filepath.Join(v, cloneDirName))
		return nil
	})
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, err
	}
	return &Clone{f: f}, nil
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
