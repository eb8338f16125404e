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
	"golang.org/x/term"
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
}

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
	return wait(cmd, sigs, o.Stop, forward)
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
	winch := make(chan os.Signal, 1)
	if isTerm {
		signal.Notify(winch, syscall.SIGWINCH)
		go func() {
			defer guard()
			for range winch {
				_ = pty.InheritSize(o.Stdin, ptmx)
			}
		}()
	}

	if o.Stdin != nil {
		go func() {
			defer guard()
			o.Gate.copyIn(ptmx, o.Stdin)
			// Stdin ended (a pipe, not a terminal): send EOF through the
			// line discipline.
			if !isTerm {
				_, _ = ptmx.Write([]byte{4})
			}
		}()
	}
	out := make(chan struct{})
	go func() {
		defer guard()
		defer close(out)
		o.Gate.copyOut(o.Stdout, ptmx) // ends with EIO once the command exits
	}()
	code, err = wait(cmd, sigs, o.Stop, ptyForwarder(cmd, ptmx))
	// Drain what the command wrote just before exiting.
	select {
	case <-out:
	case <-time.After(2 * time.Second):
	}
	if isTerm {
		signal.Stop(winch)
		close(winch)
	}
	return code, err
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
// cmd when stop is closed.
func wait(cmd *exec.Cmd, sigs <-chan os.Signal, stop <-chan struct{}, forward func(os.Signal)) (int, error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			return exitCode(err)
		case s := <-sigs:
			forward(s)
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
