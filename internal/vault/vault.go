// Package vault keeps the user's processes out of directories the agent
// writes. A vault is a directory of the user's with mode 000: no process of
// the user can search it (no chdir, no open below it, no listing), so host
// git discovery, which walks up from its working directory, never starts
// below it. Podman, runsc and `podman unshare` run as root of the rootless
// user namespace (CAP_DAC_OVERRIDE over the user's own inodes) and still
// reach paths below it. Lazaret itself opens what it needs through a
// directory descriptor while the vault is briefly searchable, then works
// below /proc/self/fd/<n>, which the kernel resolves without checking the
// vault's permissions again.
package vault

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Seal makes sure v exists as a real directory of the user's with mode
// 000, creating it (parents 0700) if absent, closing it if a user or an
// older lazaret opened it up.
func Seal(v string) error {
	fi, err := os.Lstat(v)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(v), 0o700); err != nil {
			return fmt.Errorf("creating the vault %s: %w", v, err)
		}
		if err := os.Mkdir(v, 0); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating the vault %s: %w", v, err)
		}
		return Seal(v)
	}
	if err := Check(v, fi); err != nil {
		return err
	}
	if fi.Mode().Perm() == 0 {
		return nil
	}
	if err := os.Chmod(v, 0); err != nil {
		return fmt.Errorf("sealing the vault %s: %w", v, err)
	}
	return nil
}

// Check verifies that fi (from Lstat of v) is a real directory the user
// owns.
func Check(v string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return fmt.Errorf("vault %s: not a directory", v)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("vault %s: owned by uid %d, not by you", v, st.Uid)
	}
	return nil
}

// With runs fn with the vault at mode and seals it again (mode 000)
// whatever fn returned. Keep fn short: while it runs, the vault is open to
// the user's processes as far as mode allows (0100: search by known name,
// no listing; 0300: also create and rename; 0400: listing, no search).
// Windows on one vault are serialized across processes (an flock on the
// vault's parent directory): otherwise one process's seal would close the
// vault under another's open (a profile's vault is shared by workspaces,
// and `lazaret state` reads it while a sandbox starts).
func With(v string, mode os.FileMode, fn func() error) error {
	unlock, err := lockParent(v)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Chmod(v, mode); err != nil {
		return fmt.Errorf("vault %s: %w", v, err)
	}
	err = fn()
	if cerr := os.Chmod(v, 0); cerr != nil && err == nil {
		err = fmt.Errorf("sealing the vault %s: %w", v, cerr)
	}
	return err
}

// lockParent takes an exclusive flock on the directory holding v.
func lockParent(v string) (func(), error) {
	p := filepath.Dir(v)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("vault %s: %w", v, &fs.PathError{Op: "open", Path: p, Err: err})
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("vault %s: locking %s: %w", v, p, err)
	}
	return func() { unix.Close(fd) }, nil
}

// Dir is a directory inside a vault, opened through it.
type Dir struct {
	f *os.File
}

// Path names the directory through the open descriptor; paths below it
// resolve without searching the vault.
func (d *Dir) Path() string { return "/proc/self/fd/" + strconv.Itoa(int(d.f.Fd())) }

// Join is Path joined with elem.
func (d *Dir) Join(elem ...string) string {
	return filepath.Join(append([]string{d.Path()}, elem...)...)
}

// Close releases the descriptor.
func (d *Dir) Close() error { return d.f.Close() }

// Open opens the directory name in vault v (never through a symlink);
// fs.ErrNotExist when there is none. With create, a missing name is made
// with mode perm (the vault is writable, mode 300, for that).
func Open(v, name string, create bool, perm os.FileMode) (*Dir, error) {
	mode := os.FileMode(0o100)
	if create {
		mode = 0o300
	}
	p := filepath.Join(v, name)
	var d *Dir
	err := With(v, mode, func() error {
		if create {
			if err := os.Mkdir(p, perm); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &fs.PathError{Op: "open", Path: p, Err: err}
		}
		d = &Dir{f: os.NewFile(uintptr(fd), p)}
		return nil
	})
	if err != nil {
		if d != nil {
			d.Close()
		}
		return nil, err
	}
	return d, nil
}

// Names lists vault v (mode 400 meanwhile: readable, not searchable).
func Names(v string) ([]string, error) {
	var names []string
	err := With(v, 0o400, func() error {
		f, err := os.Open(v)
		if err != nil {
			return err
		}
		defer f.Close()
		names, err = f.Readdirnames(-1)
		return err
	})
	return names, err
}

// Rename moves a directory into vault v as name (mode 300 meanwhile).
func Rename(v, from, name string) error {
	return With(v, 0o300, func() error {
		return os.Rename(from, filepath.Join(v, name))
	})
}
