package escclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
)

// The session's signer. The first process of every `lazaret shell`/`exec`
// in the sandbox is the session holder, the C front end in holder mode
// (`lazaret-escalate __session -- CMD...`, cmd/lazaret-escalate/holder.c):
// non-dumpable from its first instruction, it reads the session's
// delegation from a descriptor and runs CMD with LAZARET_SESSION_SOCKET
// naming its socket. On the first request on that socket it starts this
// program as the session's signer (`lazaret-escalate-go __signer
// HOLDERPID`), with the listening socket as descriptor 3 and the
// delegation on descriptor 4. The signer makes itself non-dumpable before
// anything else (main's init; measured under runsc: another process, even
// root without CAP_SYS_PTRACE, then gets EACCES on its /proc/PID/environ,
// maps and fd/*, and ptrace, /proc/PID/mem and process_vm_readv are
// refused), and serves escalation requests like the broker, signed with
// the delegated key, but only for processes descended from the holder
// (SO_PEERCRED pid, then the /proc/PID/stat parent chain). Another
// session's processes in the same sandbox can thus neither read the key
// nor have requests signed as this session (docs/SECURITY.md, Session
// Anchor).
const (
	// SignerVerb is the hidden first argument that selects signer mode.
	SignerVerb = "__signer"
	// EnvSessionSocket names the holder's socket in the session's
	// processes.
	EnvSessionSocket = session.EnvSessionSocket
)

// The signer's descriptors, set up by the holder.
const (
	signerListenFD = 3
	signerKeyFD    = 4
	// maxDelegationBlob bounds what the holder sends (three short lines).
	maxDelegationBlob = 16 << 10
)

// prSetDumpable is Linux's prctl option (the client imports only the
// standard library).
const prSetDumpable = 4

// SetNonDumpable makes this process non-dumpable; main calls it first
// thing in signer mode, before the Go program does anything else.
func SetNonDumpable() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); e != 0 {
		return e
	}
	return nil
}

// SignerMain runs the signer: args is what follows SignerVerb (the
// holder's pid). It serves until the holder dies (which kills it).
func SignerMain(args []string, stderr io.Writer) int {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "lazaret-escalate: session: "+format+"\n", a...) }
	holder := 0
	if len(args) == 1 {
		holder, _ = strconv.Atoi(args[0])
	}
	if holder < 1 {
		logf("usage: lazaret-escalate-go %s HOLDERPID (started by the session holder)", SignerVerb)
		return ExitUsage
	}
	del, err := readDelegation(os.NewFile(signerKeyFD, "delegation"))
	if err != nil {
		logf("host escalation is unavailable in this session: %v", err)
		return ExitFailure
	}
	// The holder set PR_SET_PDEATHSIG before the exec; a holder gone
	// before that left this process to another parent.
	if os.Getppid() != holder {
		logf("the session holder %d is gone", holder)
		return ExitFailure
	}
	lf := os.NewFile(signerListenFD, "session-socket")
	ln, err := net.FileListener(lf)
	_ = lf.Close()
	if err != nil {
		logf("host escalation is unavailable in this session: %v", err)
		return ExitFailure
	}
	loadClientConfig = (&configCache{}).load
	b := &Broker{Delegated: del, Peer: sessionPeer(holder), Log: logf}
	if err := b.Serve(context.Background(), ln); err != nil {
		logf("%v", err)
		return ExitFailure
	}
	return 0
}

// readDelegation reads the holder's NAME=VALUE lines (ParseDelegation)
// from f to its end and closes it.
func readDelegation(f *os.File) (*session.Delegated, error) {
	if f == nil {
		return nil, errors.New("no delegation descriptor")
	}
	defer f.Close()
	blob, err := io.ReadAll(io.LimitReader(f, maxDelegationBlob+1))
	if err != nil {
		return nil, fmt.Errorf("reading the delegation: %w", err)
	}
	defer clear(blob)
	return ParseDelegation(blob)
}

// ParseDelegation reads the delegation the CLI passes to the holder:
// lines of NAME=VALUE for LAZARET_SESSION_ID, LAZARET_DELEGATION and
// LAZARET_DELEGATED_KEY (session.Delegated.Env), each at most once.
func ParseDelegation(blob []byte) (*session.Delegated, error) {
	if len(blob) > maxDelegationBlob {
		return nil, errors.New("delegation too long")
	}
	vals := map[string]string{}
	// A line is never quoted in an error: it may hold the key.
	for i, line := range strings.Split(strings.TrimSuffix(string(blob), "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || (k != session.EnvSessionID && k != session.EnvDelegation && k != session.EnvDelegatedKey) {
			return nil, fmt.Errorf("delegation line %d: not one of %s, %s, %s", i+1, session.EnvSessionID, session.EnvDelegation, session.EnvDelegatedKey)
		}
		if _, dup := vals[k]; dup {
			return nil, fmt.Errorf("delegation: %s given twice", k)
		}
		vals[k] = v
	}
	return session.FromEnv(func(k string) string { return vals[k] })
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
