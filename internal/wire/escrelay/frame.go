// Package escrelay is the framing of Host Escalation through an exec
// stream (the Kubernetes backend): a relay daemon in the sandbox
// (`lazaret-escalate-go __relay-serve DIR`, started by the bridge
// `__relay DIR` that lazaret-kube execs) listens on the session's
// escalation socket and carries each connection over the exec's stdin and
// stdout as frames; lazaret-kube hands each connection to the escalation
// server. The daemon outlives the exec: connections wait in it while no
// host is linked and resume, byte for byte, when the same host links
// again (mux.go).
// The relay is the agent's to kill or replace: the mutual TLS inside the
// connections and the session's signature are what the host trusts, so
// a hostile relay can only deny service. Both ends parse frames from the
// other as untrusted: sizes and connection counts are bounded.
package escrelay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types.
const (
	// Open (relay → host): a client connected; ID is new.
	Open byte = 'O'
	// Data (both ways): bytes of connection ID.
	Data byte = 'D'
	// Close (both ways): the sender is done with connection ID.
	Close byte = 'C'
	// Bundle (host → relay): the TLS client bundle (trust.BundleFile) to
	// write into the session's TLS directory; the first frame, and again
	// at each rotation.
	Bundle byte = 'B'
	// Ready (relay → host): the socket listens; sent on every link after
	// its first Bundle (the host heeds the first only).
	Ready byte = 'R'
	// Resume (both ways, ID 0): sent at the start of every link (by the
	// host right after its Bundle): one ResumeEntry per connection the
	// sender knows. Each side then re-sends what the other did not
	// receive; see mux.go.
	Resume byte = 'S'
	// End (host → relay, ID 0): the session is over: the relay closes
	// every connection, removes its directory and exits.
	End byte = 'E'
)

// ResumeEntry is one connection of a Resume frame: its id and the total
// bytes of it the sender has received; 12 bytes on the wire, big endian.
type ResumeEntry struct {
	ID       uint32
	Received uint64
}

const resumeEntryLen = 12

// EncodeResume is the payload of a Resume frame.
func EncodeResume(es []ResumeEntry) []byte {
	b := make([]byte, 0, len(es)*resumeEntryLen)
	for _, e := range es {
		b = binary.BigEndian.AppendUint32(b, e.ID)
		b = binary.BigEndian.AppendUint64(b, e.Received)
	}
	return b
}

// DecodeResume parses a Resume payload Read has checked.
func DecodeResume(p []byte) []ResumeEntry {
	es := make([]ResumeEntry, 0, len(p)/resumeEntryLen)
	for ; len(p) >= resumeEntryLen; p = p[resumeEntryLen:] {
		es = append(es, ResumeEntry{ID: binary.BigEndian.Uint32(p), Received: binary.BigEndian.Uint64(p[4:])})
	}
	return es
}

// Limits.
const (
	// MaxPayload bounds one frame's payload.
	MaxPayload = 64 << 10
	// MaxConns bounds the connections open at once on each side.
	MaxConns  = 32
	headerLen = 9
)

// Frame is one frame: type, connection id (0 for Bundle and Ready) and
// payload.
type Frame struct {
	Type    byte
	ID      uint32
	Payload []byte
}

// ErrFrame is a malformed frame: the stream cannot be trusted further.
var ErrFrame = errors.New("escalation relay: malformed frame")

// Write writes f to w in one call: type, id and length (big endian),
// payload.
func Write(w io.Writer, f Frame) error {
	if len(f.Payload) > MaxPayload {
		return fmt.Errorf("%w: payload of %d bytes", ErrFrame, len(f.Payload))
	}
	if f.Type == Resume && (len(f.Payload)%resumeEntryLen != 0 || len(f.Payload) > MaxConns*resumeEntryLen) {
		return fmt.Errorf("%w: resume of %d bytes", ErrFrame, len(f.Payload))
	}
	b := make([]byte, headerLen+len(f.Payload))
	b[0] = f.Type
	binary.BigEndian.PutUint32(b[1:5], f.ID)
	binary.BigEndian.PutUint32(b[5:9], uint32(len(f.Payload)))
	copy(b[headerLen:], f.Payload)
	_, err := w.Write(b)
	return err
}

// Read reads one frame from r, refusing an unknown type or a payload over
// MaxPayload before allocating it. io.EOF means the stream ended cleanly
// between frames.
func Read(r io.Reader) (Frame, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, fmt.Errorf("%w: truncated header", ErrFrame)
		}
		return Frame{}, err
	}
	f := Frame{Type: h[0], ID: binary.BigEndian.Uint32(h[1:5])}
	switch f.Type {
	case Open, Data, Close, Bundle, Ready, End:
	case Resume:
		if n := binary.BigEndian.Uint32(h[5:9]); n%resumeEntryLen != 0 || n > MaxConns*resumeEntryLen {
			return Frame{}, fmt.Errorf("%w: resume of %d bytes", ErrFrame, n)
		}
	default:
		return Frame{}, fmt.Errorf("%w: type %#x", ErrFrame, f.Type)
	}
	n := binary.BigEndian.Uint32(h[5:9])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: payload of %d bytes", ErrFrame, n)
	}
	if n > 0 {
		f.Payload = make([]byte, n)
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			return Frame{}, fmt.Errorf("%w: truncated payload: %w", ErrFrame, err)
		}
	}
	return f, nil
}

// The relay's command line and its session directory's layout, shared by
// lazaret-kube and the in-sandbox client.
const (
	// Verb starts lazaret-escalate-go as the relay's bridge: `__relay
	// DIR` joins its stdin and stdout to the relay daemon's link socket,
	// starting the daemon first if none listens.
	Verb = "__relay"
	// ServeVerb starts the relay daemon: `__relay-serve DIR` (started by
	// the bridge, in a session of its own, outliving it).
	ServeVerb = "__relay-serve"
	// Socket and TLSDir are below DIR: the session's escalation socket and
	// the directory of its TLS bundle. LinkSocket is the daemon's socket
	// for its bridge.
	Socket     = "sock"
	TLSDir     = "tls"
	LinkSocket = "link"
	// EnvSocket and EnvTLSDir point the session's clients at them.
	EnvSocket = "LAZARET_ESCALATE_SOCKET"
	EnvTLSDir = "LAZARET_TLS_DIR"
)

// BinDir is where a cluster pod's agent container finds the escalation
// client: a read-only volume mounted directly below "/". Measured under
// gVisor: root in the container (no capabilities) can rename a directory
// holding a mount point, /run included, and then make a new one with
// programs of its own at the old path, but cannot rename the mount point
// itself (EBUSY), nor "/"; so no ancestor of the client's path can be
// swapped, and a later session's holder is lazaret's.
const BinDir = "/lazaret"

// The client's programs there, and the variable that names the Go
// client to the front end and the holder (which starts it as the
// session's signer).
const (
	BinFrontEnd = BinDir + "/" + FrontEndBinary
	BinGoClient = BinDir + "/" + InstallerBinary
	EnvGoClient = "LAZARET_ESCALATE_FALLBACK"
)

// The installer of a cluster pod (netdpod): `/lazaret-escalate-go
// __install DIR` in the netd image copies the image's escalation client
// into DIR.
const (
	InstallVerb     = "__install"
	InstallerBinary = "lazaret-escalate-go"
	// FrontEndBinary is the C front end beside it in the image.
	FrontEndBinary = "lazaret-escalate"
)
