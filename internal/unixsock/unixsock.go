// Package unixsock creates private UNIX sockets without touching the
// process umask. The umask is process-wide: changing it for a bind while
// other goroutines create directories once made a domain's gitsentry/
// directory 0600 (unusable: every later start failed).
package unixsock

import (
	"fmt"
	"io/fs"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Listen binds a stream socket at path and then makes it mode 0600. Until
// the chmod the socket has the mode the umask gives it; callers put their
// sockets in a directory only the user can enter (the runtime directory,
// domain.EnsurePrivateDir), which keeps everyone else out whatever the
// socket's mode. A file already at path is an error.
func Listen(path string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return ln, nil
}

// ListenReplacing is Listen after removing the socket a dead process left
// at path: callers hold the lock that makes any socket there stale. Any
// other kind of file at path is an error and stays.
func ListenReplacing(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	return Listen(path)
}

// PeerCred returns the credentials the kernel recorded for the process at
// the other end of a UNIX socket connection (SO_PEERCRED), translated
// into the caller's namespaces.
func PeerCred(nc net.Conn) (*unix.Ucred, error) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}
