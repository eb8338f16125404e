package store

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// moveAside renames the file at path to <path>.corrupt-<UTC timestamp>
// while holding an exclusive flock on it, and returns the new name. It
// returns "" when the file is gone or was replaced meanwhile (another
// process moved it first). The old file is never deleted.
// held says this process already holds the lock through another
// descriptor, so waiting for it would only time out.
func moveAside(path string, timeout time.Duration, held bool) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	deadline := time.Now().Add(timeout)
	for !held {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return "", err
		}
		if time.Now().After(deadline) {
			return "", inUse(path)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var opened, now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &opened); err != nil {
		return "", err
	}
	if err := unix.Lstat(path, &now); err != nil || now.Dev != opened.Dev || now.Ino != opened.Ino {
		return "", nil
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	for i := 0; i < 100; i++ {
		dst := path + ".corrupt-" + stamp
		if i > 0 {
			dst = fmt.Sprintf("%s.%d", dst, i)
		}
		// Link then unlink rather than rename: rename would silently
		// replace an earlier corrupt file of the same second.
		if err := os.Link(path, dst); err != nil {
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return "", err
		}
		if err := os.Remove(path); err != nil {
			return "", err
		}
		return dst, nil
	}
	return "", fmt.Errorf("too many corrupt copies of %s", path)
}
