// Package podkeep is the protocol of a cluster session's terminal keeper
// in the pod (internal/insandbox/podkeep) and lazaret-kube's side of it
// (Client): the session's command runs on a PTY the keeper holds, so it
// goes on when lazaret-kube's exec stream dies (the laptop sleeps); each
// exec is one link, carrying frames (internal/wire/termframe) over its
// stdin and stdout without a TTY. The keeper keeps the last output with
// absolute offsets: a client says in Hello how much it has, and gets
// the rest, or a Lost count for what fell out of the keeper's ring.
//
// The agent can reach the keeper's socket, and the keeper runs as the
// agent: both ends parse the other's frames as untrusted (bounded
// frames, checked payloads). The worst a hostile keeper can do is deny
// service or garble the agent's own terminal; prompts and approvals are
// never drawn through it.
package podkeep

import (
	"encoding/binary"
	"fmt"
)

// Verb is the hidden verb of lazaret-escalate-go that runs the keeper's
// commands: run, attach and (the daemon) serve.
const Verb = "__podkeep"

// ExitNoSession is attach's exit code when DIR holds no keeper.
const ExitNoSession = 3

// RunArgv is the exec command that starts a keeper in dir running
// command on a new PTY, then links to it.
func RunArgv(bin, dir string, command []string) []string {
	return append([]string{bin, Verb, "run", dir, "--"}, command...)
}

// AttachArgv is the exec command that links to the keeper already in dir.
func AttachArgv(bin, dir string) []string {
	return []string{bin, Verb, "attach", dir}
}

// Frame types.
const (
	// Client → keeper.
	FrameHello    byte = 'H' // the first frame: output bytes the client has (uint64)
	FrameInput    byte = 'i' // keys for the terminal
	FrameResize   byte = 'r' // the terminal's size: rows, cols (uint16 each)
	FrameHangup   byte = 'h' // the user's terminal went away: end the command
	FrameExitSeen byte = 'e' // the client has the exit code: the keeper may go
	// Keeper → client.
	FrameOutput byte = 'o' // the command's output, from the client's offset on
	FrameLost   byte = 'l' // output bytes no longer kept (uint64), skipped
	FrameExit   byte = 'x' // the command ended: its exit code (int32), after all its output
)

// Size is a terminal's size.
type Size struct{ Rows, Cols uint16 }

// MaxSide bounds a terminal side the keeper accepts.
const MaxSide = 1000

// EncodeSize is FrameResize's payload.
func EncodeSize(s Size) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint16(b, s.Rows)
	binary.BigEndian.PutUint16(b[2:], s.Cols)
	return b
}

// DecodeSize reads FrameResize's payload; zero or above MaxSide is refused.
func DecodeSize(p []byte) (Size, error) {
	if len(p) != 4 {
		return Size{}, fmt.Errorf("resize frame of %d bytes, want 4", len(p))
	}
	s := Size{Rows: binary.BigEndian.Uint16(p), Cols: binary.BigEndian.Uint16(p[2:])}
	if s.Rows == 0 || s.Cols == 0 || s.Rows > MaxSide || s.Cols > MaxSide {
		return Size{}, fmt.Errorf("terminal size %dx%d out of range", s.Cols, s.Rows)
	}
	return s, nil
}

// EncodeCount is the payload of FrameHello and FrameLost.
func EncodeCount(n uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, n)
}

// DecodeCount reads the payload of FrameHello and FrameLost.
func DecodeCount(p []byte) (uint64, error) {
	if len(p) != 8 {
		return 0, fmt.Errorf("count frame of %d bytes, want 8", len(p))
	}
	return binary.BigEndian.Uint64(p), nil
}

// EncodeExit is FrameExit's payload.
func EncodeExit(code int) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(int32(code)))
}

// DecodeExit reads FrameExit's payload.
func DecodeExit(p []byte) (int, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("exit frame of %d bytes, want 4", len(p))
	}
	return int(int32(binary.BigEndian.Uint32(p))), nil
}
