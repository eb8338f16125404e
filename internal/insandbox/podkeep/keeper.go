package podkeep

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/execx"
	"github.com/lazaret-dev/lazaret/internal/ptyfd"
	wire "github.com/lazaret-dev/lazaret/internal/wire/podkeep"
)

// Defaults of a Keeper's tunables.
const (
	// DefaultRingSize is how much of the last output a keeper keeps for
	// a client that was away.
	DefaultRingSize = 4 << 20
	// DefaultKillWait: a command hung up and still alive after it is killed.
	DefaultKillWait = 5 * time.Second
	// DefaultLinger: an ended session nobody links to is dropped after it.
	DefaultLinger = 24 * time.Hour
	// helloWait bounds the wait for a new connection's Hello.
	helloWait = 30 * time.Second
	// drainWait bounds reading what the command wrote just before it
	// exited (a background process may hold the PTY open for ever).
	drainWait = 2 * time.Second
	readChunk = 32 << 10
)

// Keeper is one session's keeper: the command on its PTY, the output
// ring, the linked client.
type Keeper struct {
	Argv []string
	// Tunables (fields for the tests); zero is the default.
	RingSize int
	KillWait time.Duration
	Linger   time.Duration

	mu     sync.Mutex
	ring   *ring
	ptmx   *os.File // nil when the command could not start
	pid    int      // the command, its session and group; 0 once ended
	client *peer
	exited bool // the command ended and all its output is in the ring
	code   int
	done   chan struct{}
	finish sync.Once
}

// Start starts the command. A command that cannot start is reported as
// a shell would: a line of output and exit code 127.
func (k *Keeper) Start() {
	k.RingSize = cmpOr(k.RingSize, DefaultRingSize)
	k.KillWait = cmpOr(k.KillWait, DefaultKillWait)
	k.Linger = cmpOr(k.Linger, DefaultLinger)
	k.ring, k.done = newRing(k.RingSize), make(chan struct{})
	cmd, err := k.startCommand()
	if err != nil {
		name := "the command"
		if len(k.Argv) > 0 {
			name = k.Argv[0]
		}
		k.ring.write(fmt.Appendf(nil, "lazaret: cannot start %s: %v\r\n", name, err))
		k.ended(127)
		return
	}
	pumped := make(chan struct{})
	go k.pump(pumped)
	go k.waitCommand(cmd, pumped)
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// startCommand runs Argv on a new PTY, as the leader of its own session
// with the PTY as its controlling terminal.
func (k *Keeper) startCommand() (*exec.Cmd, error) {
	if len(k.Argv) == 0 {
		return nil, errors.New("no command")
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	_ = unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80})
	master, err := ptyfd.Pollable(ptmx)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(k.Argv[0], k.Argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.Env = withTerm(os.Environ())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		master.Close()
		return nil, err
	}
	k.mu.Lock()
	k.ptmx, k.pid = master, cmd.Process.Pid
	k.mu.Unlock()
	return cmd, nil
}

// withTerm adds TERM when the exec's environment has none (an exec
// without a TTY gets none): the command is on a terminal.
func withTerm(env []string) []string {
	for _, e := range env {
		if len(e) >= 5 && e[:5] == "TERM=" {
			return env
		}
	}
	return append(env, "TERM=xterm")
}

// pump copies the command's output into the ring until the PTY closes;
// it never waits for a client (the ring absorbs what a slow or absent
// one has not taken).
func (k *Keeper) pump(pumped chan<- struct{}) {
	defer close(pumped)
	buf := make([]byte, readChunk)
	for {
		n, err := k.ptmx.Read(buf)
		if n > 0 {
			k.mu.Lock()
			k.ring.write(buf[:n])
			c := k.client
			k.mu.Unlock()
			c.poke()
		}
		if err != nil {
			return
		}
	}
}

// waitCommand waits for the command's end and its last output.
func (k *Keeper) waitCommand(cmd *exec.Cmd, pumped <-chan struct{}) {
	code := execx.ShellExitCode(cmd.Wait())
	k.mu.Lock()
	k.pid = 0 // reaped: no signal may reach a recycled pid
	k.mu.Unlock()
	select {
	case <-pumped:
	case <-time.After(drainWait):
	}
	k.ptmx.Close()
	<-pumped
	k.ended(code)
}

// ended records the exit: the linked client and every later one get it
// after their output.
func (k *Keeper) ended(code int) {
	k.mu.Lock()
	k.exited, k.code, k.pid = true, code, 0
	c := k.client
	k.mu.Unlock()
	c.poke()
	time.AfterFunc(k.Linger, k.lingered)
}

// lingered drops the ended session unless a client is linked right now.
func (k *Keeper) lingered() {
	k.mu.Lock()
	linked := k.client != nil
	k.mu.Unlock()
	if linked {
		time.AfterFunc(k.Linger, k.lingered)
		return
	}
	k.finish.Do(func() { close(k.done) })
}

// hangUp ends the command as a terminal going away would: SIGHUP to its
// group and to the terminal's foreground group, SIGKILL KillWait later
// if it still runs.
func (k *Keeper) hangUp() {
	k.mu.Lock()
	pid, ptmx := k.pid, k.ptmx
	k.mu.Unlock()
	if pid == 0 {
		return
	}
	groups := []int{pid}
	if sc, err := ptmx.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			if pg, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil && pg > 0 && pg != pid {
				groups = append(groups, pg)
			}
		})
	}
	signalGroups(groups, unix.SIGHUP)
	time.AfterFunc(k.KillWait, func() {
		k.mu.Lock()
		alive := k.pid == pid
		k.mu.Unlock()
		if alive {
			signalGroups(groups, unix.SIGKILL)
		}
	})
}

func signalGroups(groups []int, sig unix.Signal) {
	for _, g := range groups {
		_ = unix.Kill(-g, sig)
	}
}

// setSize resizes the PTY (through the poller: Fd would make the master
// blocking, and a close would no longer end the pump's read).
func (k *Keeper) setSize(s wire.Size) {
	k.mu.Lock()
	ptmx := k.ptmx
	k.mu.Unlock()
	if ptmx == nil {
		return
	}
	if sc, err := ptmx.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			_ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: s.Rows, Col: s.Cols})
		})
	}
}

// Run serves ln until the session is over (ExitSeen, or Linger after
// the exit), then closes it and the linked client. Start first.
func (k *Keeper) Run(ln net.Listener) {
	go k.accept(ln)
	<-k.done
	ln.Close()
	k.mu.Lock()
	c := k.client
	k.client = nil
	k.mu.Unlock()
	c.close()
}

// accept links each connection that says Hello.
func (k *Keeper) accept(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			select {
			case <-k.done:
				return
			case <-time.After(100 * time.Millisecond): // EMFILE and the like
				continue
			}
		}
		go k.link(conn)
	}
}
