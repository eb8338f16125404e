// Package coord is the Session Coordinator: the hold-to-bind protocol that
// makes exactly one coordinator per Domain Anchor, the coordinator process
// itself (sandbox start, control socket, reference counting, teardown) and
// crash recovery.
package coord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrInsecureLock is a lock file that is not a regular file owned by the
// current user.
var ErrInsecureLock = errors.New("insecure lock file")

// Lock is the hold-to-bind lock file of one domain. It is never unlinked:
// unlinking would let a second process lock a new inode while a first still
// holds the old one.
type Lock struct {
	f *os.File
}

// OpenLock opens (creating if needed, mode 0600) the lock file at path. It
// refuses a symlink (O_NOFOLLOW) and a file that is not a regular file of
// the current user.
func OpenLock(path string) (*Lock, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("lock file %s is a symlink: %w", path, ErrInsecureLock)
		}
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("lock file %s is not a regular file: %w", path, ErrInsecureLock)
	}
	if int(st.Uid) != os.Getuid() {
		f.Close()
		return nil, fmt.Errorf("lock file %s is owned by uid %d, not %d: %w", path, st.Uid, os.Getuid(), ErrInsecureLock)
	}
	if st.Mode&0o077 != 0 {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock file %s: %w", path, err)
		}
	}
	return &Lock{f: f}, nil
}

// TryLock takes the lock without waiting; false means another process
// holds it.
func (l *Lock) TryLock() (bool, error) {
	err := flock(l.f, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// Lock waits for the lock or for ctx to end.
func (l *Lock) Lock(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- flock(l.f, unix.LOCK_EX) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// The blocked flock keeps waiting; closing the file in Close
		// releases whatever it gets.
		return ctx.Err()
	}
}

// Unlock releases the lock.
func (l *Lock) Unlock() error { return flock(l.f, unix.LOCK_UN) }

// Close releases the lock and closes the file.
func (l *Lock) Close() error { return l.f.Close() }

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
