package kubecli

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
)

// terminal is the user's terminal during a TTY session: in raw mode (so
// Ctrl-C and the other keys reach the sandbox as bytes), its size sent
// at start and on every SIGWINCH, restored by close on every path.
type terminal struct {
	sizes   chan kube.TermSize
	winch   chan os.Signal
	restore func()
	once    sync.Once
}

// openTerminal prepares in/out for a session; without tty, or when in is
// not a terminal, it changes nothing and sends no sizes.
func openTerminal(in, out *os.File, tty bool) (*terminal, error) {
	t := &terminal{restore: func() {}}
	if !tty || in == nil || !term.IsTerminal(int(in.Fd())) {
		return t, nil
	}
	state, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return nil, err
	}
	t.restore = func() { _ = term.Restore(int(in.Fd()), state) }
	sizeOf := out
	if sizeOf == nil || !term.IsTerminal(int(sizeOf.Fd())) {
		sizeOf = in
	}
	t.sizes = make(chan kube.TermSize, 1)
	t.winch = make(chan os.Signal, 1)
	signal.Notify(t.winch, syscall.SIGWINCH)
	send := func() {
		w, h, err := term.GetSize(int(sizeOf.Fd()))
		if err != nil || w <= 0 || h <= 0 || w > 0xffff || h > 0xffff {
			return
		}
		select { // the newest size wins; a stale one waiting is dropped
		case <-t.sizes:
		default:
		}
		t.sizes <- kube.TermSize{Width: uint16(w), Height: uint16(h)}
	}
	send()
	go func() {
		for range t.winch {
			send()
		}
	}()
	return t, nil
}

// Sizes is the channel of sizes, nil without a terminal.
func (t *terminal) Sizes() <-chan kube.TermSize {
	if t.sizes == nil {
		return nil
	}
	return t.sizes
}

// close restores the terminal and stops the size updates.
func (t *terminal) close() {
	t.once.Do(func() {
		t.restore()
		if t.winch != nil {
			signal.Stop(t.winch)
			close(t.winch)
		}
	})
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
