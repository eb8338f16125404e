package keeper

import (
	"encoding/binary"
	"fmt"
)

// Frame types of the keeper socket; the codec is termframe's.
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
