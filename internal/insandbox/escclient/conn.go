package escclient

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// blockingConn is a connected UNIX stream socket driven by plain blocking
// system calls instead of Go's netpoller. Inside gVisor every system call
// is a trap into the Sentry (tens of microseconds under systrap on the
// project's VM), and the netpoller turns each wait for the coordinator
// into read (EAGAIN) + epoll_pwait + read, plus a hand-off between
// threads; here a wait is one read. The client has a single connection
// and nothing else to do while it waits, so blocking its thread costs
// nothing. Cancellation (--timeout) goes through Close, which shuts the
// socket down: that wakes a blocked read or write, unlike close(2).
type blockingConn struct {
	fd   int
	addr *net.UnixAddr
	// rbuf holds what one read returned beyond what the caller asked for:
	// crypto/tls reads a record header, then the record, each with its
	// own small read; the server's whole first flight arrives at once and
	// is taken in one system call.
	rbuf []byte
	roff int

	mu       sync.Mutex
	released bool
}

// dialBlocking connects to the UNIX stream socket at path. A connect to a
// listener whose backlog is full waits; with a deadline (--timeout) the
// wait is bounded by SO_SNDTIMEO, which Linux applies to a UNIX socket's
// connect, and the expired context is returned.
func dialBlocking(ctx context.Context, path string) (*blockingConn, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	dl, bounded := ctx.Deadline()
	if bounded {
		tv := syscall.NsecToTimeval(max(time.Until(dl), time.Millisecond).Nanoseconds())
		if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv); err != nil {
			_ = syscall.Close(fd)
			return nil, os.NewSyscallError("setsockopt", err)
		}
	}
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		_ = syscall.Close(fd)
		if cerr := ctx.Err(); cerr != nil && (err == syscall.EAGAIN || err == syscall.EINPROGRESS) {
			return nil, cerr
		}
		return nil, os.NewSyscallError("connect", err)
	}
	if bounded {
		// Writes are not bounded this way: Close interrupts them.
		var zero syscall.Timeval
		if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &zero); err != nil {
			_ = syscall.Close(fd)
			return nil, os.NewSyscallError("setsockopt", err)
		}
	}
	return &blockingConn{fd: fd, addr: &net.UnixAddr{Name: path, Net: "unix"}}, nil
}

// readBufSize is the most one read takes from the socket: more than a
// TLS handshake flight or a few answer frames.
const readBufSize = 16 << 10

func (c *blockingConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.roff == len(c.rbuf) {
		if c.rbuf == nil {
			c.rbuf = make([]byte, readBufSize)
		}
		n, err := c.read(c.rbuf[:cap(c.rbuf)])
		if err != nil {
			c.rbuf, c.roff = c.rbuf[:0], 0
			return 0, err
		}
		c.rbuf, c.roff = c.rbuf[:n], 0
	}
	n := copy(p, c.rbuf[c.roff:])
	c.roff += n
	return n, nil
}

// read is one read(2) into p, retried on EINTR; 0 bytes is io.EOF.
func (c *blockingConn) read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(c.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *blockingConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(c.fd, p[done:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, os.NewSyscallError("write", err)
		}
		done += n
	}
	return done, nil
}

// Close shuts the socket down in both directions, which makes a read or
// write blocked in another goroutine return; the descriptor itself is
// closed by release, once nothing can use it any more.
func (c *blockingConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil
	}
	return os.NewSyscallError("shutdown", syscall.Shutdown(c.fd, syscall.SHUT_RDWR))
}

// release closes the descriptor.
func (c *blockingConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.released {
		c.released = true
		_ = syscall.Close(c.fd)
	}
}

func (c *blockingConn) LocalAddr() net.Addr  { return &net.UnixAddr{Net: "unix"} }
func (c *blockingConn) RemoteAddr() net.Addr { return c.addr }

// errNoDeadlines: the client bounds its wait with --timeout (Close), not
// with deadlines; crypto/tls does not need them.
var errNoDeadlines = errors.New("blocking socket: deadlines are not supported")

func (c *blockingConn) SetDeadline(time.Time) error      { return errNoDeadlines }
func (c *blockingConn) SetReadDeadline(time.Time) error  { return errNoDeadlines }
func (c *blockingConn) SetWriteDeadline(time.Time) error { return errNoDeadlines }
