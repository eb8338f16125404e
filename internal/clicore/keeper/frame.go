package keeper

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types of the keeper socket. A frame is its type byte, its
// payload's length (uint32, big-endian) and the payload.
const (
	// Client → keeper.
	FrameInput  byte = 'i' // keys for the session's terminal
	FrameResize byte = 'r' // the client's size: rows, cols (uint16 each)
	FrameDetach byte = 'd' // the user typed the detach keys
	FrameHangup byte = 'h' // the client's terminal went away
	// Keeper → client.
	FrameOutput    byte = 'o' // what the session wrote (first: the redraw)
	FrameExit      byte = 'x' // the session ended: its exit code (int32)
	FrameTakenOver byte = 't' // another terminal attached
)

// MaxFrame bounds a frame's payload: a reader never allocates more for
// one frame, whatever the other end claims.
const MaxFrame = 64 << 10

// frameHeader is the type byte and the length.
const frameHeader = 5

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("frame of %d bytes (at most %d)", len(payload), MaxFrame)
	}
	b := make([]byte, frameHeader+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:frameHeader], uint32(len(payload)))
	copy(b[frameHeader:], payload)
	_, err := w.Write(b)
	return err
}

// ErrFrameTooLong is ReadFrame's error for a length above MaxFrame.
var ErrFrameTooLong = errors.New("keeper frame too long")

// ReadFrame reads one frame. Its type is not checked: each end ignores
// the types it does not know.
func ReadFrame(r io.Reader) (byte, []byte, error) {
	var h [frameHeader]byte
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

// Size is a terminal's size.
type Size struct{ Rows, Cols uint16 }

// encodeSize is FrameResize's payload.
func encodeSize(s Size) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint16(b, s.Rows)
	binary.BigEndian.PutUint16(b[2:], s.Cols)
	return b
}

// maxSide bounds a terminal side a client may ask for: the emulator
// allocates rows × cols cells.
const maxSide = 1000

// decodeSize reads FrameResize's payload; a size of zero or above
// maxSide is refused.
func decodeSize(p []byte) (Size, error) {
	if len(p) != 4 {
		return Size{}, fmt.Errorf("resize frame of %d bytes, want 4", len(p))
	}
	s := Size{Rows: binary.BigEndian.Uint16(p), Cols: binary.BigEndian.Uint16(p[2:])}
	if s.Rows == 0 || s.Cols == 0 || s.Rows > maxSide || s.Cols > maxSide {
		return Size{}, fmt.Errorf("terminal size %dx%d out of range", s.Cols, s.Rows)
	}
	return s, nil
}

// encodeExit is FrameExit's payload.
func encodeExit(code int) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(int32(code)))
	return b
}

// decodeExit reads FrameExit's payload.
func decodeExit(p []byte) (int, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("exit frame of %d bytes, want 4", len(p))
	}
	return int(int32(binary.BigEndian.Uint32(p))), nil
}
