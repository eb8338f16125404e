package escrelay

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// rawRelay plays the relay with raw frames over a pair of pipes for Host.
type rawRelay struct {
	toHost   *io.PipeWriter // the relay's stdout
	fromHost *io.PipeReader // the relay's stdin
	linked   chan error     // Link's result
}

// newPair links a Host (bundle "pem") to a raw relay that has answered
// the handshake with Ready and an empty Resume.
func newPair(t *testing.T) (*Host, *rawRelay) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := NewHost()
	if err := h.SetBundle([]byte("pem")); err != nil {
		t.Fatal(err)
	}
	r := &rawRelay{toHost: outW, fromHost: inR, linked: make(chan error, 1)}
	go func() { r.linked <- h.Link(inW, outR) }()
	t.Cleanup(func() { outW.Close(); inR.Close() })
	if f := r.read(t); f.Type != Bundle || string(f.Payload) != "pem" {
		t.Fatalf("first frame %+v, want the bundle", f)
	}
	if f := r.read(t); f.Type != Resume || len(f.Payload) != 0 {
		t.Fatalf("second frame %+v, want an empty Resume", f)
	}
	r.send(t, Frame{Type: Ready})
	r.send(t, Frame{Type: Resume})
	return h, r
}

// send may run on another goroutine: it reports with Error.
func (r *rawRelay) send(t *testing.T, f Frame) {
	t.Helper()
	if err := Write(r.toHost, f); err != nil {
		t.Error(err)
	}
}

func (r *rawRelay) read(t *testing.T) Frame {
	t.Helper()
	f, err := Read(r.fromHost)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestHostCarriesConnections: Open makes a connection Accept returns;
// bytes go both ways; the server's close reaches the relay as Close.
func TestHostCarriesConnections(t *testing.T) {
	h, r := newPair(t)
	<-h.Ready()
	if !h.Linked() {
		t.Fatal("not linked")
	}
	r.send(t, Frame{Type: Open, ID: 3})
	c, err := h.Accept()
	if err != nil {
		t.Fatal(err)
	}
	go r.send(t, Frame{Type: Data, ID: 3, Payload: []byte("ping")})
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("server read %q, %v", buf, err)
	}
	go func() { _, _ = c.Write([]byte("pong")); c.Close() }()
	if f := r.read(t); f.Type != Data || f.ID != 3 || string(f.Payload) != "pong" {
		t.Fatalf("relay got %+v", f)
	}
	if f := r.read(t); f.Type != Close || f.ID != 3 {
		t.Fatalf("relay got %+v, want Close 3", f)
	}
	// A new bundle goes out on the current link.
	go func() { _ = h.SetBundle([]byte("pem2")) }()
	if f := r.read(t); f.Type != Bundle || string(f.Payload) != "pem2" {
		t.Fatalf("relay got %+v, want the new bundle", f)
	}
}

// TestHostBoundsConnections: beyond MaxConns, and for an id already in
// use, the host answers Close and accepts nothing more.
func TestHostBoundsConnections(t *testing.T) {
	h, r := newPair(t)
	accepted := make(chan net.Conn, 2*MaxConns)
	go func() {
		for {
			c, err := h.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for i := uint32(1); i <= MaxConns; i++ {
		r.send(t, Frame{Type: Open, ID: i})
	}
	go r.send(t, Frame{Type: Open, ID: MaxConns + 1})
	if f := r.read(t); f.Type != Close || f.ID != MaxConns+1 {
		t.Fatalf("connection over the limit: %+v, want Close", f)
	}
	go r.send(t, Frame{Type: Open, ID: 1})
	if f := r.read(t); f.Type != Close || f.ID != 1 {
		t.Fatalf("an id in use: %+v, want Close", f)
	}
	for i := 0; i < MaxConns; i++ {
		select {
		case <-accepted:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d connections accepted", i)
		}
	}
	select {
	case <-accepted:
		t.Fatal("more than MaxConns accepted")
	default:
	}
}

// TestHostMalformedEndsLink: a malformed frame, a second Resume, a
// connection's frame before Resume or a frame that goes the other way ends
// the link with ErrFrame; the listener stays open for the next link.
func TestHostMalformedEndsLink(t *testing.T) {
	for name, f := range map[string]Frame{
		"second resume": {Type: Resume},
		"bundle":        {Type: Bundle, Payload: []byte("x")},
		"end":           {Type: End},
	} {
		h, r := newPair(t)
		go r.send(t, f)
		if err := <-r.linked; !errors.Is(err, ErrFrame) {
			t.Errorf("%s: Link = %v, want ErrFrame", name, err)
		}
		if h.Linked() {
			t.Errorf("%s: still linked", name)
		}
	}
	h, r := newPair(t)
	go func() { _, _ = r.toHost.Write([]byte{'X', 0, 0, 0, 0, 0, 0, 0, 0}) }()
	if err := <-r.linked; !errors.Is(err, ErrFrame) {
		t.Errorf("unknown type: Link = %v", err)
	}
	// Data before the relay's Resume.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- h.Link(inW, outR) }()
	go func() { _, _ = io.Copy(io.Discard, inR) }()
	_ = Write(outW, Frame{Type: Data, ID: 1, Payload: []byte("x")})
	if err := <-done; !errors.Is(err, ErrFrame) {
		t.Errorf("data before resume: Link = %v", err)
	}
	h.End()
	if _, err := h.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after End: %v", err)
	}
	if err := h.Link(inW, outR); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Link after End: %v", err)
	}
}

// TestHostNeedsBundle: no link without a bundle.
func TestHostNeedsBundle(t *testing.T) {
	if err := NewHost().Link(io.Discard, eofReader{}); err == nil {
		t.Fatal("linked without a bundle")
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
