// Package keeper keeps a session's terminal when nobody is at it (the
// dtach/abduco model): the keeper process holds a PTY whose slave is the
// controlling terminal of the session's own CLI (the inner, the same
// binary with the user's verb), copies what it writes into a terminal
// emulator, and lends it to the terminal that attaches through a private
// UNIX socket. Every prompt, gate and hang-up of the inner works as on a
// plain terminal; the keeper only tells it, on descriptor 3, whether a
// terminal is attached.
package keeper

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/execx"
	"github.com/lazaret-dev/lazaret/internal/ptyfd"
	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

// Verb is the hidden verb that runs a keeper (`lazaret __keep …`).
const Verb = "__keep"

// EnvInner tells the inner CLI it is kept: its value is the descriptor of
// the keeper's state lines.
const EnvInner = "LAZARET_KEEPER"

// State lines, keeper → inner, and the inner's one line back.
const (
	StateAttached  = "attached"
	StateDetached  = "detached"
	StateAttention = "attention"
	// LineStarted: the inner reached its coordinator ("started ID").
	LineStarted = "started"
)

// attentionEvery rate-limits the attention reports of a detached session.
const attentionEvery = 10 * time.Second

// firstAttachWait bounds the wait of a keeper spawned for an attach for
// that attach (its spawner died in between otherwise).
const firstAttachWait = time.Minute

// Options are one keeper's (its command line).
type Options struct {
	ID, Dir            string
	Profile, Workspace string
	Backend            string
	// OnCloseEnd: a terminal that goes away ends the session (a hang-up
	// of the inner's terminal) instead of detaching it.
	OnCloseEnd bool
	// Detached: start the inner now, not at the first attach.
	Detached bool
	Size     Size
	// Inner is the inner CLI's argv after the executable.
	Inner []string
}

// keeper is one running keeper.
type keeper struct {
	o     Options
	log   *slog.Logger
	ready *os.File // the spawner's pipe, nil once answered

	mu   sync.Mutex
	scr  *screen
	ptmx *os.File
	// inner is the session's CLI once started.
	inner     *os.Process
	state     *os.File // the inner's descriptor 3, our end
	client    *peer
	info      Info
	attention time.Time
	ended     bool
	exited    chan int
	pumped    chan struct{}
}

// afterStartHook, set by a test, runs between the first start and its
// attach (a keeper descheduled there, as under load).
var afterStartHook func()

// run serves ln until the session ends; the caller removes the files.
func (k *keeper) run(ln *net.UnixListener) (int, error) {
	if !k.o.Detached {
		k.answer("listening\n")
		_ = ln.SetDeadline(time.Now().Add(firstAttachWait))
		conn, size, err := k.accept(ln)
		if err != nil {
			return 0, fmt.Errorf("no terminal attached: %w", err)
		}
		_ = ln.SetDeadline(time.Time{})
		k.o.Size = size
		if err := k.start(); err != nil {
			return 0, err
		}
		if afterStartHook != nil {
			afterStartHook()
		}
		k.attach(conn, size, true)
	} else if err := k.start(); err != nil {
		return 0, err
	}
	// Read the session's output only now: what it printed before its first
	// terminal was attached (a fresh attach redraws nothing) waited in the
	// PTY instead of going to the screen alone (measured: a first line
	// lost under load).
	go k.pump()
	go k.serve(ln)
	return k.wait(), nil
}

// accept takes the next connection of the keeper's user and its size.
func (k *keeper) accept(ln *net.UnixListener) (net.Conn, Size, error) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return nil, Size{}, err
		}
		if err := allowed(conn); err != nil {
			k.log.Warn("attach refused", "err", err)
			conn.Close()
			continue
		}
		// The first frame is the terminal's size.
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		typ, p, err := termframe.ReadFrame(conn)
		_ = conn.SetReadDeadline(time.Time{})
		size, serr := decodeSize(p)
		if err != nil || typ != FrameResize || serr != nil {
			k.log.Warn("attach without a valid size", "err", errors.Join(err, serr))
			conn.Close()
			continue
		}
		return conn, size, nil
	}
}

// serve attaches each later connection, taking the session over.
func (k *keeper) serve(ln *net.UnixListener) {
	for {
		conn, size, err := k.accept(ln)
		if err != nil {
			return
		}
		k.attach(conn, size, false)
	}
}

// start runs the inner on a new PTY, with the state socket on its
// descriptor 3.
func (k *keeper) start() error {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return err
	}
	defer tty.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: k.o.Size.Rows, Cols: k.o.Size.Cols}); err != nil {
		ptmx.Close()
		return err
	}
	pollable, err := ptyfd.Pollable(ptmx)
	if err != nil {
		return err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		pollable.Close()
		return err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "keeper-state"), os.NewFile(uintptr(fds[1]), "inner-state")
	defer theirs.Close()
	exe, err := os.Executable()
	if err != nil {
		pollable.Close()
		mine.Close()
		return err
	}
	cmd := exec.Command(exe, k.o.Inner...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Env = append(os.Environ(), EnvInner+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		pollable.Close()
		mine.Close()
		return err
	}
	k.mu.Lock()
	k.ptmx, k.state, k.scr, k.inner = pollable, mine, newScreen(k.o.Size, k.rang), cmd.Process
	k.info.Started = time.Now()
	k.mu.Unlock()
	k.tell(StateDetached) // attach says otherwise when a terminal is there
	k.exited, k.pumped = make(chan int, 1), make(chan struct{})
	go k.readInner()
	go func() { k.exited <- execx.ShellExitCode(cmd.Wait()) }()
	return nil
}

// readInner reads the inner's line: its session id once it started.
func (k *keeper) readInner() {
	sc := bufio.NewScanner(k.state)
	sc.Buffer(make([]byte, 256), 256)
	for sc.Scan() {
		word, id, _ := strings.Cut(sc.Text(), " ")
		if word != LineStarted {
			continue
		}
		k.mu.Lock()
		k.info.Session = id
		k.mu.Unlock()
		k.saveInfo()
		k.answer(LineStarted + " " + id + "\n")
	}
}

// answer tells the spawner how the start went, once.
func (k *keeper) answer(s string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ready == nil {
		return
	}
	_, _ = k.ready.WriteString(s)
	if s != "listening\n" {
		k.ready.Close()
		k.ready = nil
	}
}

// tell writes one state line to the inner.
func (k *keeper) tell(line string) {
	k.mu.Lock()
	st := k.state
	k.mu.Unlock()
	if st != nil {
		_, _ = st.WriteString(line + "\n")
	}
}

// saveInfo writes the info file from the current state.
func (k *keeper) saveInfo() {
	k.mu.Lock()
	i := k.info
	k.mu.Unlock()
	if err := writeInfo(k.o.Dir, i); err != nil {
		k.log.Warn("writing the info file", "err", err)
	}
}
