package podkeep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

// Client is lazaret-kube's side of one session, across links.
type Client struct {
	// Out gets the session's output, each byte exactly once across links.
	Out io.Writer
	// Offset counts the output bytes written to Out so far (and those
	// the keeper reported lost); Serve advances it.
	Offset uint64

	size  Size // the last size sent, sent again on each link
	sized bool
}

// ErrBadFrame is a frame from the pod whose payload does not parse: the
// link is not trusted further.
var ErrBadFrame = errors.New("podkeep: malformed frame from the pod")

// inFrame is one frame read from the pod, or the read's error.
type inFrame struct {
	typ byte
	p   []byte
	err error
}

// link is one Serve's state.
type link struct {
	c       *Client
	frames  <-chan inFrame
	wq      chan<- []byte // to the writer; nil flushes (see flush)
	werr    <-chan error
	pending [][]byte // encoded frames for the writer, nil markers included
	keys    <-chan []byte
	sizes   <-chan Size
	hangup  <-chan struct{}
	exited  bool
	code    int
}

// Serve runs one link over an exec's stdin (podIn) and stdout (podOut),
// both without a TTY: it sends Hello with c.Offset and the last known
// size, then keys (Input), sizes (Resize) and, once hangup is closed,
// Hangup; it writes Output to c.Out, advancing c.Offset. It returns
// ended with the command's exit code once the keeper reported Exit and
// Serve acknowledged it (err is then the acknowledgement's error, if
// any: the keeper lingers); otherwise not ended, with the error that
// ended the link (io.EOF: the stream just ended), and the caller links
// again (AttachArgv) and calls Serve again. A key taken from keys but
// not written because the link broke is dropped. Nothing of this link
// reads keys or writes Out once Serve returned.
func (c *Client) Serve(ctx context.Context, podIn io.Writer, podOut io.Reader, keys <-chan []byte, sizes <-chan Size, hangup <-chan struct{}) (code int, ended bool, err error) {
	stop := make(chan struct{})
	defer close(stop)
	frames := make(chan inFrame)
	wq := make(chan []byte)
	werr := make(chan error, 1)
	go readFrames(podOut, frames, stop)
	go writeFrames(podIn, wq, werr, stop)
	l := &link{c: c, frames: frames, wq: wq, werr: werr, keys: keys, sizes: sizes, hangup: hangup}
	l.queue(FrameHello, EncodeCount(c.Offset))
	if c.sized {
		l.queue(FrameResize, EncodeSize(c.size))
	}
	for {
		if done, err := l.step(ctx); done {
			return l.code, l.exited, err
		}
	}
}

// readFrames reads the pod's frames until an error, which it passes on
// too, or until Serve returned.
func readFrames(r io.Reader, out chan<- inFrame, stop <-chan struct{}) {
	for {
		typ, p, err := termframe.ReadFrame(r)
		select {
		case out <- inFrame{typ, p, err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// writeFrames writes what Serve queues, off Serve's loop: a write stuck
// on a dead link must not keep Serve from seeing the link end.
func writeFrames(w io.Writer, in <-chan []byte, errc chan<- error, stop <-chan struct{}) {
	for {
		select {
		case b := <-in:
			if b == nil { // a flush marker: the write before it is done
				continue
			}
			if _, err := w.Write(b); err != nil {
				errc <- err
				return
			}
		case <-stop:
			return
		}
	}
}

// queue adds one frame for the writer.
func (l *link) queue(typ byte, payload []byte) {
	l.pending = append(l.pending, termframe.Append(nil, typ, payload))
}

// step waits for one event; done: Serve returns (with err).
func (l *link) step(ctx context.Context) (bool, error) {
	var out chan<- []byte
	var next []byte
	keys := l.keys
	if len(l.pending) > 0 {
		out, next = l.wq, l.pending[0]
		keys = nil // one write at a time: what is queued stays bounded
	} else if l.exited {
		return true, nil // ExitSeen is written
	}
	select {
	case <-ctx.Done():
		return true, ctx.Err()
	case err := <-l.werr:
		return true, err
	case out <- next:
		l.pending = l.pending[1:]
	case k, ok := <-keys:
		l.key(k, ok)
	case s, ok := <-l.sizes:
		if !ok {
			l.sizes = nil
		} else if s != l.c.size || !l.c.sized {
			l.c.size, l.c.sized = s, true
			l.queue(FrameResize, EncodeSize(s))
		}
	case <-l.hangup:
		l.hangup = nil
		l.queue(FrameHangup, nil)
	case f := <-l.frames:
		return l.frame(f)
	}
	return false, nil
}

// key queues keys in frames of at most termframe.MaxFrame bytes; a
// closed channel is no more keys.
func (l *link) key(k []byte, ok bool) {
	if !ok {
		l.keys = nil
		return
	}
	for len(k) > 0 {
		n := min(len(k), termframe.MaxFrame)
		l.queue(FrameInput, k[:n])
		k = k[n:]
	}
}

// frame takes one frame from the pod.
func (l *link) frame(f inFrame) (bool, error) {
	if f.err != nil {
		if l.exited { // the keeper may go as soon as ExitSeen arrived
			l.frames = nil
			return false, nil
		}
		return true, f.err
	}
	if l.exited {
		return false, nil // nothing follows Exit but the acknowledgement
	}
	switch f.typ {
	case FrameOutput:
		n, err := l.c.Out.Write(f.p)
		l.c.Offset += uint64(n)
		if err == nil && n < len(f.p) {
			err = io.ErrShortWrite
		}
		return err != nil, err
	case FrameLost:
		n, err := DecodeCount(f.p)
		if err != nil {
			return true, fmt.Errorf("%w: %v", ErrBadFrame, err)
		}
		if n > math.MaxUint64-l.c.Offset {
			return true, fmt.Errorf("%w: %d bytes lost past offset %d", ErrBadFrame, n, l.c.Offset)
		}
		l.c.Offset += n
		_, err = fmt.Fprintf(l.c.Out, "\r\nlazaret: %d bytes of output were lost while away\r\n", n)
		return err != nil, err
	case FrameExit:
		code, err := DecodeExit(f.p)
		if err != nil {
			return true, fmt.Errorf("%w: %v", ErrBadFrame, err)
		}
		l.exited, l.code = true, code
		l.queue(FrameExitSeen, nil)
		l.pending = append(l.pending, nil) // Serve returns once ExitSeen is written
	}
	return false, nil
}
