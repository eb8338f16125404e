// Package ptyfd keeps a PTY master in Go's poller, where closing it ends
// a read under way: the local keeper, `lazaret attach`'s direct mode and
// the pod's terminal keeper each hold a master that a hang-up must be
// able to close while the command is silent. creack/pty's Open hands a
// master that Fd made blocking; a read of it outlives its Close.
package ptyfd

import (
	"os"

	"golang.org/x/sys/unix"
)

// Pollable returns a non-blocking copy of f's descriptor, in the poller,
// and closes f.
func Pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}
