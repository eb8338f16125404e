package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/lazaret-dev/lazaret/internal/session"
)

// The session holder: the first process of every `lazaret shell`/`exec`
// in the sandbox (`lazaret-escalate-go __session -- CMD...`). It takes the
// session's delegated key out of its own environment, makes itself
// non-dumpable (measured under runsc: another process, even root without
// CAP_SYS_PTRACE, then gets EACCES on its /proc/PID/environ, maps and
// fd/*, and ptrace, /proc/PID/mem and process_vm_readv are refused), and
// runs CMD as its child without the key, with LAZARET_SESSION_SOCKET
// naming a socket on which it serves escalation requests like the broker,
// signed with the key it holds, but only for processes descended from it
// (SO_PEERCRED pid, then the /proc/PID/stat parent chain). Another
// session's processes in the same sandbox can thus neither read the key
// nor have requests signed as this session (docs/SECURITY.md, Session
// Anchor).
const (
	// SessionVerb is the hidden first argument that selects holder mode.
	SessionVerb = session.HolderVerb
	// EnvSessionSocket names the holder's socket in the session's
	// processes.
	EnvSessionSocket = session.EnvSessionSocket
)

// Linux prctl options (the client imports only the standard library).
const (
	prSetDumpable       = 4
	prSetChildSubreaper = 36
)

// SetNonDumpable makes this process non-dumpable; main calls it first
// thing in holder mode, before the Go program does anything else.
func SetNonDumpable() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); e != 0 {
		return e
	}
	return nil
}

// SessionMain runs the holder: args is what follows SessionVerb ("--",
// then the command). It returns the command's exit code (128+N when a
// signal N ended it), 126/127 when the command cannot be run or is not
// found. A holder that cannot serve (no key, no socket) still runs the
// command, without escalation, and says why: the session itself must not
// depend on it.
func SessionMain(args []string, stderr io.Writer) int {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "lazaret-escalate: session: "+format+"\n", a...) }
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		logf("no command")
		return ExitUsage
	}
	dir, err := serveSession(logf)
	if err != nil {
		logf("host escalation is unavailable in this session: %v", err)
	}
	code := runChild(args, logf)
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	return code
}

// serveSession takes the key out of the environment and serves it on a
// socket in a new private directory, which it returns; the key is dropped
// from the environment whatever happens.
func serveSession(logf func(string, ...any)) (string, error) {
	del, err := takeDelegation()
	if err != nil {
		return "", err
	}
	if err := SetNonDumpable(); err != nil {
		return "", fmt.Errorf("cannot make the session holder non-dumpable: %w", err)
	}
	// Orphans of the session stay its descendants (and are reaped here).
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	dir, err := os.MkdirTemp("", "lazaret-session-")
	if err != nil {
		return "", err
	}
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	if err := os.Setenv(EnvSessionSocket, sock); err != nil {
		ln.Close()
		_ = os.RemoveAll(dir)
		return "", err
	}
	loadClientConfig = (&configCache{}).load
	b := &Broker{Delegated: del, Peer: sessionPeer(os.Getpid()), Log: logf}
	go func() { _ = b.Serve(context.Background(), ln) }()
	return dir, nil
}

// takeDelegation reads the delegation from the environment, removes the
// key and the delegation from it (the command must not inherit them) and
// overwrites the key's bytes in the initial environment block, which is
// what /proc/PID/environ shows.
func takeDelegation() (*session.Delegated, error) {
	del, err := session.FromEnv(os.Getenv)
	defer func() {
		_ = os.Unsetenv(session.EnvDelegatedKey)
		_ = os.Unsetenv(session.EnvDelegation)
	}()
	if err != nil {
		return nil, err
	}
	// Best effort: the process is non-dumpable already, so no other
	// process reads its environ; the scrub keeps the key out of it should
	// that ever change.
	_ = ScrubEnv(session.EnvDelegatedKey)
	return del, nil
}

// ScrubEnv overwrites every value of name in the process's initial
// environment block, which is what /proc/PID/environ shows (the Go
// runtime works on copies). The block lies at the top of the main
// thread's stack; it is found in [stack] and rewritten through
// /proc/self/mem, which a process may always use on itself.
func ScrubEnv(name string) error {
	lo, hi, err := stackRange()
	if err != nil {
		return err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	// The environment block is within the top of the stack.
	if hi-lo > 1<<20 {
		lo = hi - 1<<20
	}
	buf := make([]byte, hi-lo)
	if _, err := mem.ReadAt(buf, int64(lo)); err != nil {
		return err
	}
	needle := []byte("\x00" + name + "=")
	for off := 0; ; {
		i := bytes.Index(buf[off:], needle)
		if i < 0 {
			return nil
		}
		start := off + i + len(needle)
		end := start + bytes.IndexByte(buf[start:], 0)
		if end < start {
			end = len(buf)
		}
		if _, err := mem.WriteAt(bytes.Repeat([]byte("x"), end-start), int64(lo)+int64(start)); err != nil {
			return err
		}
		off = end
	}
}

// stackRange returns the main thread's stack mapping from /proc/self/maps.
func stackRange() (lo, hi uint64, err error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasSuffix(line, "[stack]") {
			continue
		}
		a, z, ok := strings.Cut(strings.Fields(line)[0], "-")
		if !ok {
			break
		}
		if lo, err = strconv.ParseUint(a, 16, 64); err == nil {
			hi, err = strconv.ParseUint(z, 16, 64)
		}
		return lo, hi, err
	}
	return 0, 0, errors.New("no [stack] in /proc/self/maps")
}

// runChild runs the command with the holder's stdio and environment and
// waits for it, reaping orphans meanwhile; it forwards the signals that
// reach the holder and not the command (a terminal's SIGINT and SIGQUIT go
// to the foreground process group, which holds the command already).
func runChild(args []string, logf func(string, ...any)) int {
	path, err := exec.LookPath(args[0])
	if err != nil {
		logf("%v", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGUSR1, syscall.SIGUSR2)
	p, err := os.StartProcess(path, args, &os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		logf("%v", err)
		return 126
	}
	tty := isTTY(0)
	go func() {
		for s := range sigs {
			if tty && (s == syscall.SIGINT || s == syscall.SIGQUIT || s == syscall.SIGTSTP) {
				continue
			}
			_ = p.Signal(s)
		}
	}()
	return reapUntil(p.Pid)
}

// reapUntil reaps children (the command, and orphans the holder adopted
// as subreaper) until pid exits, and returns its shell-style exit code.
func reapUntil(pid int) int {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return ExitFailure
		}
		if got != pid {
			continue
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
}

func isTTY(fd int) bool {
	var t syscall.Termios
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return e == 0
}

// errNotSession refuses a peer that is not a process of this session.
var errNotSession = errors.New("the peer is not a process of this session")

// sessionPeer returns the check of a connection's peer: its SO_PEERCRED
// pid must be a descendant of holder.
func sessionPeer(holder int) func(net.Conn) error {
	return func(c net.Conn) error {
		uc, ok := c.(*net.UnixConn)
		if !ok {
			return errNotSession
		}
		raw, err := uc.SyscallConn()
		if err != nil {
			return err
		}
		var cred *syscall.Ucred
		var serr error
		if err := raw.Control(func(fd uintptr) {
			cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		}); err != nil {
			return err
		}
		if serr != nil {
			return serr
		}
		if !Descends(int(cred.Pid), holder, readPPid) {
			return fmt.Errorf("%w (pid %d)", errNotSession, cred.Pid)
		}
		return nil
	}
}

// maxDepth bounds the walk up the parent chain.
const maxDepth = 4096

// Descends reports whether pid is a proper descendant of ancestor,
// walking parents with ppid.
func Descends(pid, ancestor int, ppid func(int) (int, error)) bool {
	for i := 0; i < maxDepth && pid > 1; i++ {
		p, err := ppid(pid)
		if err != nil {
			return false
		}
		if p == ancestor {
			return true
		}
		pid = p
	}
	return false
}

// readPPid reads the parent pid from /proc/PID/stat.
func readPPid(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return ParsePPid(b)
}

// ParsePPid takes the parent pid out of a /proc/PID/stat line: the field
// after the state, which follows the last ')' (the command name in
// parentheses may itself hold ')' and spaces).
func ParsePPid(stat []byte) (int, error) {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("malformed stat")
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("malformed stat: parent %q", f[1])
	}
	return n, nil
}
