// Package termframe is the frame codec of the terminal keepers' sockets
// (the local keeper, internal/clicore/keeper, and the pod's,
// internal/wire/podkeep): a frame is its type byte, its payload's length
// (uint32, big-endian) and the payload. The frame types are each
// protocol's own. A reader bounds what it allocates whatever the other
// end claims: both ends may be hostile.
package termframe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxFrame bounds a frame's payload: a reader never allocates more for
// one frame, whatever the other end claims.
const MaxFrame = 64 << 10

// Header is the length of a frame's header: the type byte and the length.
const Header = 5

// Append appends one frame to b (no bound checked: the caller's payloads
// are its own, at most MaxFrame).
func Append(b []byte, typ byte, payload []byte) []byte {
	b = append(b, typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[len(b)-4:], uint32(len(payload)))
	return append(b, payload...)
}

// WriteFrame writes one frame in one Write.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("frame of %d bytes (at most %d)", len(payload), MaxFrame)
	}
	_, err := w.Write(Append(make([]byte, 0, Header+len(payload)), typ, payload))
	return err
}

// ErrFrameTooLong is ReadFrame's error for a length above MaxFrame.
var ErrFrameTooLong = errors.New("terminal frame too long")

// ReadFrame reads one frame. Its type is not checked: each end ignores
// the types it does not know.
func ReadFrame(r io.Reader) (byte, []byte, error) {
	var h [Header]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrFrameTooLong, n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, unexpected(err)
	}
	return h[0], p, nil
}

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
