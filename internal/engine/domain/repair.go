package domain

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/vault"
)

// GitSentryDir holds the Git Sentry's config files (internal/coordinator/gitsentry).
func (a *Anchor) GitSentryDir() string { return filepath.Join(a.Root(), "gitsentry") }

// overlayRootName is the State Anchor's directory under the Domain Root.
const overlayRootName = "overlay"

// RepairModes gives the domain's directories their modes back. A process
// that once changed its umask while other goroutines created directories
// left some of them 0600 (no search permission), and every later start
// failed with "permission denied". The private directories (Domain Root,
// gitsentry/, the runtime and TLS directories) become 0700 if they are
// anything else; overlay/ is a vault and becomes 000; the State Anchor's 0755 directories become 0755
// if their owner cannot enter them. Only real directories owned by the
// user are touched: nothing is followed through a symlink. It returns the
// directories it changed.
func (a *Anchor) RepairModes() ([]string, error) {
	r := &repairer{uid: uint32(unix.Getuid())}
	for _, d := range []string{a.RuntimeDir, a.TLSDir()} {
		r.repair(unix.AT_FDCWD, d, d, private)
	}
	root := r.open(unix.AT_FDCWD, a.Root(), a.Root(), private)
	if root < 0 {
		return r.fixed, r.err
	}
	defer unix.Close(root)
	r.repair(root, "gitsentry", a.GitSentryDir(), private)
	// The State Anchor's root is a vault (internal/vault): mode 000, so
	// that no process of the user ever enters what the agent wrote there.
	ovPath := filepath.Join(a.Root(), overlayRootName)
	ov := r.open(root, overlayRootName, ovPath, sealed)
	if ov < 0 {
		return r.fixed, r.err
	}
	defer unix.Close(ov)
	r.overlayChildren(ov, ovPath)
	return r.fixed, r.err
}

// overlayChildren repairs overlay/.empty and
// overlay/<name>/<name>_{changes,work,merged}, opening the vault for it
// (listing, then search) and sealing it again.
func (r *repairer) overlayChildren(ov int, ovPath string) {
	names, err := vault.Names(ovPath)
	if err != nil {
		r.err = errors.Join(r.err, fmt.Errorf("%s: %w", ovPath, err))
		return
	}
	err = vault.With(ovPath, 0o100, func() error {
		r.overlayDirs(ov, ovPath, names)
		return nil
	})
	if err != nil {
		r.err = errors.Join(r.err, err)
	}
}

func (r *repairer) overlayDirs(ov int, ovPath string, names []string) {
	for _, n := range names {
		fd := r.open(ov, n, filepath.Join(ovPath, n), enterable)
		if fd < 0 || n == ".empty" {
			if fd >= 0 {
				unix.Close(fd)
			}
			continue
		}
		for _, sub := range []string{n + "_changes", n + "_work", n + "_merged"} {
			r.repair(fd, sub, filepath.Join(ovPath, n, sub), enterable)
		}
		unix.Close(fd)
	}
}

// sealed wants 000 exactly; private wants 0700 exactly; enterable wants 0755 when the owner lacks
// any of rwx (the mark of the umask damage), and leaves other modes alone.
func private(mode uint32) (uint32, bool) { return 0o700, mode&0o7777 != 0o700 }
func sealed(mode uint32) (uint32, bool)  { return 0, mode&0o7777 != 0 }
func enterable(mode uint32) (uint32, bool) {
	return 0o755, mode&0o700 != 0o700
}

type repairer struct {
	uid   uint32
	fixed []string
	err   error
}

// open opens name (relative to dirfd) as a directory without following a
// symlink, repairs its mode if it is the user's and want says so, and
// returns its descriptor (O_PATH; -1 when absent, not a real directory or
// on error, which is recorded).
func (r *repairer) open(dirfd int, name, path string, want func(uint32) (uint32, bool)) int {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		// Absent, a symlink or not a directory: not ours to repair.
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
			r.err = errors.Join(r.err, fmt.Errorf("%s: %w", path, err))
		}
		return -1
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		r.err = errors.Join(r.err, fmt.Errorf("%s: %w", path, err))
		return -1
	}
	if st.Uid != r.uid {
		return fd
	}
	if mode, fix := want(st.Mode); fix {
		// Through the descriptor: the directory checked is the one changed.
		if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode); err != nil {
			r.err = errors.Join(r.err, fmt.Errorf("%s: restoring mode %o: %w", path, mode, err))
		} else {
			r.fixed = append(r.fixed, path)
		}
	}
	return fd
}

// repair is open for a directory not descended into.
func (r *repairer) repair(dirfd int, name, path string, want func(uint32) (uint32, bool)) {
	if fd := r.open(dirfd, name, path, want); fd >= 0 {
		unix.Close(fd)
	}
}
