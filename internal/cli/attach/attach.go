// Package attach runs a command (podman exec) with the user's terminal or
// streams: under a PTY with the terminal in raw mode, window-size changes
// forwarded and the terminal restored on every exit path; or with the
// standard streams passed straight through. It returns the command's exit
// code.
package attach

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/ptyfd"
)

// Options describe the streams of one attach.
type Options struct {
	// TTY runs the command under a new PTY. When Stdin is a terminal it is
	// put in raw mode for the duration, so that Ctrl-C and the other
	// control keys reach the sandboxed process as bytes.
	TTY    bool
	Stdin  *os.File
	Stdout *os.File
	Stderr *os.File
	// Stop, when closed, ends the command (the sandbox is going away).
	Stop <-chan struct{}
	// Gate, when set, lets the escalation prompt take the terminal over
	// (TTY mode only; see Gate).
	Gate *Gate
	// Signal, when set, delivers a signal lazaret received to the
	// sandboxed command itself (plain mode). podman exec does not proxy
	// signals: signalled, it exits and leaves the command running in the
	// sandbox. With Signal set, podman also runs in its own process group,
	// so a Ctrl-C on the terminal reaches lazaret (which passes it on) but
	// not podman.
	Signal func(os.Signal)
	// Wiring, when set, hands the streams to the command itself (runsc
	// exec passes them on as descriptors); otherwise they become the
	// command's standard streams.
	Wiring Wiring
	// Hangup, when set, delivers sig to the sandboxed session the way a
	// terminal's hang-up reaches a session: to its controlling process
	// (the session holder, which passes it on to the shell, which passes
	// SIGHUP on to its jobs). TTY mode only: SIGHUP when the user's
	// terminal went away, SIGKILL when the command has not ended
	// HangupWait later. Nil: the command (the exec) itself is signalled.
	Hangup func(syscall.Signal)
}

// ErrHungUp is Run's error when the user's terminal went away (TTY mode):
// lazaret got SIGHUP, or reading or writing the terminal failed. The
// session was ended (see Options.Hangup) and Run's code is 128+SIGHUP,
// whatever the command's own was.
var ErrHungUp = errors.New("the terminal hung up")

// HangupWait is how long the command of a session whose terminal hung up
// has to end after SIGHUP before it is killed, and then how long its exec
// has to go after the kill.
const HangupWait = 3 * time.Second

// hangupSignalWait bounds the wait for Options.Hangup's deliveries (a
// second exec in the sandbox) before Run returns.
const hangupSignalWait = 10 * time.Second

// Wiring connects a command's streams in its own way.
type Wiring interface {
	// Wire hands in, out and errOut to the command before its start and
	// returns the descriptor, in the command, of in (with a TTY, the
	// controlling terminal).
	Wire(in, out, errOut *os.File, tty bool) (int, error)
	// Started runs once the command started, or failed to.
	Started()
	// Done runs once the command has exited.
	Done()
}

// forwarded are the signals passed on to the command instead of ending
// lazaret. In TTY mode SIGINT and SIGQUIT arrive as bytes through the PTY;
// they are still caught, so a signal sent to lazaret by kill(1) is passed
// on rather than leaving the command orphaned.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Run starts cmd with the streams of o, waits for it, and returns its exit
// code (128+n when it died of signal n). An error means the command could
// not be run at all.
func Run(cmd *exec.Cmd, o Options) (int, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// If lazaret is killed (SIGKILL leaves no chance to forward anything),
	// podman exec goes too rather than lingering without its terminal.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	if o.TTY {
		return runTTY(cmd, o)
	}
	return runPlain(cmd, o)
}

func runPlain(cmd *exec.Cmd, o Options) (int, error) {
	if o.Wiring != nil {
		if _, err := o.Wiring.Wire(o.Stdin, o.Stdout, o.Stderr, false); err != nil {
			return 0, err
		}
		defer o.Wiring.Done()
	} else {
		// The descriptors are handed to the command as they are: no
		// copying goroutine in between, EOF and half-close behave as for
		// any pipe.
		cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	}
	forward := func(s os.Signal) { _ = cmd.Process.Signal(s) }
	var stdinPipe *os.File
	if o.Signal != nil {
		cmd.SysProcAttr.Setpgid = true
		forward = func(s os.Signal) { go o.Signal(s) }
		if o.Wiring == nil && o.Stdin != nil && term.IsTerminal(int(o.Stdin.Fd())) {
			// Outside the terminal's foreground group podman may not read
			// the terminal (SIGTTIN): lazaret reads it and feeds a pipe.
			r, w, err := os.Pipe()
			if err != nil {
				return 0, err
			}
			cmd.Stdin, stdinPipe = r, w
			defer r.Close()
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	err := cmd.Start()
	if o.Wiring != nil {
		o.Wiring.Started()
	}
	if err != nil {
		if stdinPipe != nil {
			stdinPipe.Close()
		}
		return 0, err
	}
	if stdinPipe != nil {
		go func() {
			_, _ = io.Copy(stdinPipe, o.Stdin)
			stdinPipe.Close()
		}()
	}
	return wait(cmd, sigs, o.Stop, forward, nil)
}

func runTTY(cmd *exec.Cmd, o Options) (code int, err error) {
	isTerm := o.Stdin != nil && term.IsTerminal(int(o.Stdin.Fd()))
	var size *pty.Winsize
	if isTerm {
		size, _ = pty.GetsizeFull(o.Stdin)
	}
	ptmx, err := startPTY(cmd, size, o.Wiring)
	if err != nil {
		return 0, err
	}
	defer ptmx.Close()
	if o.Wiring != nil {
		defer o.Wiring.Done()
	}

	restore, err := rawMode(cmd, o.Stdin, isTerm)
	if err != nil {
		return 0, err
	}
	// Restored on return and on a panic anywhere below, including in the
	// copying goroutines (a panic there would not run this goroutine's
	// defers, so each goroutine restores too).
	defer restore()
	guard := func() {
		if r := recover(); r != nil {
			restore()
			panic(r)
		}
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	stopWinch := forwardResize(o.Stdin, ptmx, isTerm, guard)
	defer stopWinch()

	h := &hangup{c: make(chan struct{}), cmd: cmd, ptmx: ptmx, gate: o.Gate, signal: o.Hangup}
	out := copyTTY(o, ptmx, isTerm, h, guard)
	code, err = wait(cmd, sigs, o.Stop, ptyForwarder(cmd, ptmx), h)
	// Drain what the command wrote just before exiting.
	select {
	case <-out:
	case <-time.After(2 * time.Second):
	}
	return code, err
}

// forwardResize passes the terminal's size changes (SIGWINCH) on to the
// command's PTY until the returned function runs.
func forwardResize(stdin, ptmx *os.File, isTerm bool, guard func()) (stop func()) {
	if !isTerm {
		return func() {}
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		defer guard()
		for range winch {
			setSize(stdin, ptmx)
		}
	}()
	return func() {
		signal.Stop(winch)
		close(winch)
	}
}

// copyTTY starts the copying between the user's terminal and the
// command's PTY; the returned channel is closed once the command's output
// ended. A terminal that fails (a read of it ends: EIO, or EOF, which a
// terminal in raw mode gives only once hung up; or a write to it fails)
// is a hang-up.
func copyTTY(o Options, ptmx *os.File, isTerm bool, h *hangup, guard func()) <-chan struct{} {
	if o.Stdin != nil {
		go func() {
			defer guard()
			err := o.Gate.CopyIn(ptmx, o.Stdin)
			switch {
			case err == nil: // the command's side ended
			case isTerm:
				h.notice()
			default:
				// Stdin ended (a pipe, not a terminal): send EOF through
				// the line discipline.
				_, _ = ptmx.Write([]byte{4})
			}
		}()
	}
	out := make(chan struct{})
	go func() {
		defer guard()
		defer close(out)
		// Ends with EIO once the command exits.
		if o.Gate.CopyOut(o.Stdout, ptmx) != nil {
			h.notice()
		}
	}()
	return out
}

// hangup is the user's terminal going away under a TTY session: noticed
// by SIGHUP or by the terminal failing (copyTTY), whichever comes first.
type hangup struct {
	once   sync.Once
	c      chan struct{}
	cmd    *exec.Cmd
	ptmx   *os.File
	gate   *Gate
	signal func(syscall.Signal) // Options.Hangup
}

func (h *hangup) notice() { h.once.Do(func() { close(h.c) }) }

// end ends the session as a terminal's hang-up does, with the exit code
// of a process killed by SIGHUP: a prompt on the terminal loses its input,
// the session gets SIGHUP (Options.Hangup) and its terminal hangs up too
// (the PTY's master closed: the exec gets SIGHUP from the kernel, which
// runsc passes on to the sandbox's foreground process group, and reads
// of the terminal in the sandbox fail); a command still running
// HangupWait later is killed, in the sandbox and its exec. done delivers
// the command's end.
func (h *hangup) end(done <-chan error) (int, error) {
	h.gate.HangUp()
	var sent sync.WaitGroup
	deliver := func(sig syscall.Signal) {
		if h.signal == nil {
			_ = h.cmd.Process.Signal(sig)
			return
		}
		sent.Add(1)
		go func() {
			defer sent.Done()
			h.signal(sig)
		}()
	}
	deliver(syscall.SIGHUP)
	_ = h.ptmx.Close()
	select {
	case <-done:
	case <-time.After(HangupWait):
		deliver(syscall.SIGKILL)
		_ = h.cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(HangupWait):
		}
	}
	// A delivery still under way is not left behind by lazaret's exit
	// (when the command ended first it is moot, and bounded).
	delivered := make(chan struct{})
	go func() { sent.Wait(); close(delivered) }()
	select {
	case <-delivered:
	case <-time.After(hangupSignalWait):
	}
	return 128 + int(syscall.SIGHUP), ErrHungUp
}

// startPTY starts cmd on a new PTY of size (as pty.StartWithSize) and
// returns the PTY's master: cmd, or the command w wires, gets the
// terminal as its standard streams and controlling terminal, in a new
// session.
func startPTY(cmd *exec.Cmd, size *pty.Winsize, w Wiring) (*os.File, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	if size != nil {
		_ = pty.Setsize(ptmx, size)
	}
	if ptmx, err = ptyfd.Pollable(ptmx); err != nil {
		return nil, err
	}
	ctty := 0
	if w != nil {
		if ctty, err = w.Wire(tty, tty, tty, true); err != nil {
			ptmx.Close()
			return nil, err
		}
	} else {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	}
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, ctty
	err = cmd.Start()
	if w != nil {
		w.Started()
	}
	if err != nil {
		ptmx.Close()
		return nil, err
	}
	return ptmx, nil
}

// setSize gives the PTY of master (a pollable file) the size of the
// terminal from, as pty.InheritSize does, without Fd.
func setSize(from, master *os.File) {
	size, err := pty.GetsizeFull(from)
	if err != nil {
		return
	}
	c, err := master.SyscallConn()
	if err != nil {
		return
	}
	_ = c.Control(func(fd uintptr) {
		_ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols, Xpixel: size.X, Ypixel: size.Y})
	})
}

// rawMode puts the terminal stdin in raw mode (when isTerm) and returns
// what restores it, safe to call more than once. On failure the command,
// already started on its PTY, is killed.
func rawMode(cmd *exec.Cmd, stdin *os.File, isTerm bool) (restore func(), err error) {
	if !isTerm {
		return func() {}, nil
	}
	fd := int(stdin.Fd())
	state, err := term.MakeRaw(fd)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("terminal raw mode: %w", err)
	}
	var once sync.Once
	return func() { once.Do(func() { _ = term.Restore(fd, state) }) }, nil
}

// ptyForwarder passes a signal sent to lazaret on to the command: SIGINT
// and SIGQUIT (kill(1); the terminal's own Ctrl-C arrives as a byte in raw
// mode) become the same key on the command's terminal, so they reach the
// sandboxed foreground process.
func ptyForwarder(cmd *exec.Cmd, ptmx *os.File) func(os.Signal) {
	return func(sig os.Signal) {
		switch sig {
		case syscall.SIGINT:
			_, _ = ptmx.Write([]byte{0x03})
		case syscall.SIGQUIT:
			_, _ = ptmx.Write([]byte{0x1c})
		default:
			_ = cmd.Process.Signal(sig)
		}
	}
}

// wait waits for cmd, passing received signals to forward and ending
// cmd when stop is closed. With h (TTY mode), SIGHUP is the terminal's
// hang-up, not a signal to pass on: the session is ended (hangup.end).
func wait(cmd *exec.Cmd, sigs <-chan os.Signal, stop <-chan struct{}, forward func(os.Signal), h *hangup) (int, error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var hungUp <-chan struct{}
	if h != nil {
		hungUp = h.c
	}
	for {
		select {
		case err := <-done:
			return exitCode(err)
		case s := <-sigs:
			if h != nil && s == syscall.SIGHUP {
				h.notice()
				continue
			}
			forward(s)
		case <-hungUp:
			return h.end(done)
		case <-stop:
			stop = nil
			_ = cmd.Process.Signal(syscall.SIGTERM)
			go func() {
				time.Sleep(3 * time.Second)
				_ = cmd.Process.Kill()
			}()
		}
	}
}

func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ee.ExitCode(), nil
}
