package keeper

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

// Result is how an attach ended.
type Result struct {
	// Ended: the session ended with exit code Code.
	Ended bool
	Code  int
	// Detached: the user typed the detach keys; TakenOver: another
	// terminal attached; Lost: the keeper closed the connection without
	// a word (this terminal was too slow, or the keeper died).
	Detached, TakenOver, Lost bool
}

// defaultSize is a terminal's size when in is none.
var defaultSize = Size{Rows: 24, Cols: 80}

// Attach lends the terminal in/out to the session behind conn: in raw
// mode (restored on return), its size sent now and on every SIGWINCH,
// keys passed on until the detach sequence keys.
func Attach(conn net.Conn, in, out *os.File, keys []byte) (Result, error) {
	isTerm := term.IsTerminal(int(in.Fd()))
	if isTerm {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return Result{}, err
		}
		defer func() { _ = term.Restore(int(in.Fd()), old) }()
	}
	var wmu sync.Mutex
	send := func(typ byte, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return termframe.WriteFrame(conn, typ, p)
	}
	if err := send(FrameResize, encodeSize(termSize(in, isTerm))); err != nil {
		return Result{}, err
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go func() {
		for range winch {
			_ = send(FrameResize, encodeSize(termSize(in, isTerm)))
		}
	}()
	// The terminal going away (SIGHUP, or its reads failing) is the
	// keeper's to judge: it detaches the session or ends it (on_close),
	// and then this client hears the exit code.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			_ = send(FrameHangup, nil)
		}
	}()
	d := newDetachSignal()
	go relayKeys(in, keys, send, d)
	return readSession(conn, out, d)
}

// termSize is in's size, or defaultSize.
func termSize(in *os.File, isTerm bool) Size {
	if isTerm {
		if w, h, err := term.GetSize(int(in.Fd())); err == nil && w > 0 && h > 0 {
			return Size{Rows: uint16(min(h, maxSide)), Cols: uint16(min(w, maxSide))}
		}
	}
	return defaultSize
}

// detachSignal tells readSession the user detached. asked closes before
// FrameDetach goes out, sent after: the keeper closes the connection on
// FrameDetach, and that EOF can reach readSession before sent closes (it
// did, under load in CI: the detach was reported as a lost terminal).
type detachSignal struct {
	asked, sent chan struct{}
}

func newDetachSignal() detachSignal {
	return detachSignal{asked: make(chan struct{}), sent: make(chan struct{})}
}

// wasAsked reports whether the detach keys were typed.
func (d detachSignal) wasAsked() bool {
	select {
	case <-d.asked:
		return true
	default:
		return false
	}
}

// relayKeys sends what the user types, holding back a started detach
// sequence; the whole sequence sends FrameDetach (see detachSignal).
func relayKeys(in io.Reader, keys []byte, send func(byte, []byte) error, d detachSignal) {
	m := &keyMatcher{keys: keys}
	buf := make([]byte, readChunk)
	for {
		n, err := in.Read(buf)
		pass, detach := m.feed(buf[:n])
		if len(pass) > 0 && send(FrameInput, pass) != nil {
			return
		}
		if detach {
			close(d.asked)
			_ = send(FrameDetach, nil)
			close(d.sent)
			return
		}
		if err != nil {
			_ = send(FrameHangup, nil)
			return
		}
	}
}

// readSession writes the session's output until it ends, the user
// detaches or another terminal takes over.
func readSession(conn net.Conn, out io.Writer, d detachSignal) (Result, error) {
	frames := make(chan error, 1)
	var res Result
	go func() {
		for {
			typ, p, err := termframe.ReadFrame(conn)
			if err != nil {
				frames <- err
				return
			}
			switch typ {
			case FrameOutput:
				_, _ = out.Write(p)
			case FrameExit:
				code, err := decodeExit(p)
				res = Result{Ended: true, Code: code}
				frames <- err
				return
			case FrameTakenOver:
				res = Result{TakenOver: true}
				frames <- nil
				return
			}
		}
	}()
	select {
	case <-d.sent:
		conn.Close()
		return Result{Detached: true}, nil
	case err := <-frames:
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
			if d.wasAsked() {
				return Result{Detached: true}, nil
			}
			return Result{Lost: true}, nil
		}
		if err != nil {
			return res, fmt.Errorf("reading the session: %w", err)
		}
		return res, nil
	}
}

// keyMatcher finds the detach sequence in what the user types.
type keyMatcher struct {
	keys []byte
	n    int // bytes of keys matched so far, held back
}

// feed returns the bytes of p to pass on and whether the sequence is
// complete (what follows it in p is dropped: the terminal is leaving).
func (m *keyMatcher) feed(p []byte) (pass []byte, detach bool) {
	if len(m.keys) == 0 {
		return p, false
	}
	for _, c := range p {
		if c == m.keys[m.n] {
			m.n++
			if m.n == len(m.keys) {
				return pass, true
			}
			continue
		}
		if m.n > 0 {
			pass = append(pass, m.keys[:m.n]...)
			m.n = 0
			if c == m.keys[0] {
				m.n = 1
				continue
			}
		}
		pass = append(pass, c)
	}
	return pass, false
}
