// Package fdsafe keeps descriptors a lazaret process inherited out of the
// processes it starts. A terminal emulator, an IDE or a shell script may
// start lazaret with extra descriptors open without close-on-exec (the
// terminal itself, files, pipes); os/exec passes every such descriptor on
// to every child, so without this an approved host command could write to
// or read from the user's terminal.
package fdsafe

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// MarkInherited sets close-on-exec on every descriptor above 2. Called
// first thing at process start it covers everything inherited; Go opens
// all of its own descriptors close-on-exec already, so marking them again
// changes nothing, and exec.Cmd's ExtraFiles still work (they are dup2'ed
// into place in the child). Calling it again later is a cheap guard
// against a descriptor some library opened without O_CLOEXEC.
func MarkInherited() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11 (ENOSYS, EINVAL for the flag): walk the table.
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("close_range(3, ~0, CLOSE_RANGE_CLOEXEC): %w", err)
	}
	return markByWalk()
}

func markByWalk() error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing inherited descriptors: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("listing inherited descriptors: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= 2 {
			continue
		}
		// EBADF: the descriptor of the listing itself, or one closed since.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("marking descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}
