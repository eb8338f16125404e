package fsmonitor

import (
	"bufio"
	"errors"
	"io"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/fsmonproto"
	"golang.org/x/sys/unix"
)

// Paths inside the sandbox.
const (
	DefaultRoot   = "/workspace"
	DefaultSocket = fsmonproto.Socket
)

// hookTimeout bounds a query: a daemon that does not answer in time costs
// git a full scan, never a hang.
const hookTimeout = 5 * time.Second

// Ask sends one request to the daemon at socket and returns its whole
// answer, checked; any failure is an error. It uses plain blocking system
// calls, not package net: the hook is a process git starts for every
// status, and under gVisor the runtime's network poller set-up is a
// measurable part of its start (docs/PERFORMANCE.md, "Git").
func Ask(socket string, r Request) ([]byte, error) {
	req, err := EncodeRequest(r)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(hookTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, err
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return nil, err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: socket}); err != nil {
		return nil, err
	}
	for len(req) > 0 {
		n, err := unix.Write(fd, req)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return nil, err
		}
		req = req[n:]
	}
	return ReadFrame(bufio.NewReaderSize(fdReader(fd), 64<<10))
}

// fdReader reads a blocking descriptor, retrying EINTR; a receive timeout
// (EAGAIN) is an error.
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// Hook is core.fsmonitor: git runs it as `<hook> 2 <token>` in the work
// tree's top level and reads the answer from stdout. Whatever goes wrong,
// the answer is "/" with a token the daemon will not accept, so git
// checks everything now and next time. A protocol other than 2 exits 1
// (git then checks everything too).
func Hook(args []string, socket string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != HookVersion {
		io.WriteString(stderr, "lazaret-fsmonitor: git fsmonitor hook protocol 2 only (core.fsmonitorHookVersion = 2)\n")
		return 1
	}
	ans, err := query(socket, args[1])
	if err != nil {
		ans = FullAnswer(FallbackToken)
	}
	if _, err := stdout.Write(ans); err != nil {
		return 1
	}
	return 0
}

func query(socket, token string) ([]byte, error) {
	dir, err := syscall.Getwd()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("no working directory")
	}
	return Ask(socket, Request{Dir: dir, Token: token})
}
