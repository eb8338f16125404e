// Package pipedata hands a child process data on a pipe instead of in an
// argv, its environment or a file: podman's --env-file and runsc's
// --process read /dev/fd/N, so values such as secrets exist only in the
// pipe until the child has read them.
package pipedata

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Max bounds content: within what a pipe can be grown to without
// privilege (pipe-max-size, 1 MiB by default).
const Max = 1 << 20

// Reader returns the read end of a pipe that holds content and whose
// write end is closed: the child reads it to the end, so the data leaves
// the pipe at once. The pipe is grown to hold content, so nothing waits
// for a reader.
func Reader(content []byte) (*os.File, error) {
	if len(content) > Max {
		return nil, fmt.Errorf("%d bytes do not fit a pipe (at most %d)", len(content), Max)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if len(content) > 4096 {
		if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, len(content)); err != nil {
			r.Close()
			return nil, fmt.Errorf("growing the pipe to %d bytes: %w", len(content), err)
		}
	}
	if _, err := w.Write(content); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}
