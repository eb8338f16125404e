// Package domainlock is a domain's hold-to-bind lock file: the CLI that
// takes it starts the domain's coordinator (internal/cli/connect), and
// whoever removes a dead domain's leftovers holds it meanwhile, so that no
// start of that domain can begin under the removal.
package domainlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
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
	fd int

	mu sync.Mutex
	// abandoned is set when a blocking Lock gave up on its context while
	// its flock is still waiting: the waiting goroutine then owns the
	// descriptor and closes it, so the number is never reused under it.
	abandoned bool
	closed    bool
}

// Open opens (creating if needed, mode 0600) the lock file at path. It
// refuses a symlink (O_NOFOLLOW) and a file that is not a regular file of
// the current user.
func Open(path string) (*Lock, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("lock file %s is a symlink: %w", path, ErrInsecureLock)
		}
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	fail := func(err error) (*Lock, error) {
		unix.Close(fd)
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(fmt.Errorf("lock file %s: %w", path, err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fail(fmt.Errorf("lock file %s is not a regular file: %w", path, ErrInsecureLock))
	}
	if int(st.Uid) != os.Getuid() {
		return fail(fmt.Errorf("lock file %s is owned by uid %d, not %d: %w", path, st.Uid, os.Getuid(), ErrInsecureLock))
	}
	if st.Mode&0o077 != 0 {
		if err := unix.Fchmod(fd, 0o600); err != nil {
			return fail(fmt.Errorf("lock file %s: %w", path, err))
		}
	}
	return &Lock{fd: fd}, nil
}

// TryLock takes the lock without waiting; false means another process
// holds it.
func (l *Lock) TryLock() (bool, error) {
	err := flock(l.fd, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// Lock waits for the lock or for ctx to end.
func (l *Lock) Lock(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		err := flock(l.fd, unix.LOCK_EX)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.abandoned {
			unix.Close(l.fd) // releases the lock it may just have got
			return
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case err := <-done:
			// Got it just now; keep the usual ownership.
			if err == nil {
				_ = flock(l.fd, unix.LOCK_UN)
			}
		default:
			l.abandoned = true
		}
		return ctx.Err()
	}
}

// Unlock releases the lock.
func (l *Lock) Unlock() error { return flock(l.fd, unix.LOCK_UN) }

// Close releases the lock and closes the file.
func (l *Lock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.abandoned {
		l.closed = true
		return nil
	}
	l.closed = true
	return unix.Close(l.fd)
}

func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
