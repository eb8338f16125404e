package escrelay

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	var b bytes.Buffer
	in := []Frame{{Type: Open, ID: 1}, {Type: Data, ID: 1, Payload: []byte("hello")}, {Type: Close, ID: 1}, {Type: Bundle, Payload: []byte("pem")}, {Type: Ready}}
	for _, f := range in {
		if err := Write(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range in {
		got, err := Read(&b)
		if err != nil || got.Type != want.Type || got.ID != want.ID || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("Read = %+v, %v; want %+v", got, err, want)
		}
	}
	if _, err := Read(&b); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v, want EOF", err)
	}
}

// TestFrameBounds: an oversized length is refused before any allocation,
// an unknown type and a truncated frame are malformed, and Write refuses
// what Read would.
func TestFrameBounds(t *testing.T) {
	for name, raw := range map[string][]byte{
		"huge length":       {Data, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff},
		"just over":         {Data, 0, 0, 0, 1, 0, 1, 0, 1},
		"unknown type":      {'X', 0, 0, 0, 1, 0, 0, 0, 0},
		"truncated header":  {Data, 0, 0},
		"truncated payload": {Data, 0, 0, 0, 1, 0, 0, 0, 9, 'a'},
	} {
		if _, err := Read(bytes.NewReader(raw)); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: %v, want ErrFrame", name, err)
		}
	}
	if err := Write(io.Discard, Frame{Type: Data, Payload: make([]byte, MaxPayload+1)}); !errors.Is(err, ErrFrame) {
		t.Errorf("Write of an oversized payload: %v", err)
	}
	ok := append([]byte{Data, 0, 0, 0, 1, 0, 1, 0, 0}, make([]byte, MaxPayload)...)
	if _, err := Read(bytes.NewReader(ok)); err != nil {
		t.Errorf("a payload of MaxPayload: %v", err)
	}
}

// FuzzRead: any byte stream yields frames within the bounds or an error,
// never a panic, and what Read returns writes back to the same bytes.
func FuzzRead(f *testing.F) {
	var b bytes.Buffer
	_ = Write(&b, Frame{Type: Data, ID: 7, Payload: []byte("x")})
	f.Add(b.Bytes())
	f.Add([]byte{Open, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{Data, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			fr, err := Read(r)
			if err != nil {
				return
			}
			if len(fr.Payload) > MaxPayload {
				t.Fatalf("payload of %d bytes", len(fr.Payload))
			}
			var out bytes.Buffer
			if err := Write(&out, fr); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// relayEnd plays the relay over a pair of pipes for Host.
type relayEnd struct {
	toHost   *io.PipeWriter // the relay's stdout
	fromHost *io.PipeReader // the relay's stdin
}

func newPair(t *testing.T) (*Host, *relayEnd) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := NewHost(inW)
	go func() { _ = h.Run(outR) }()
	t.Cleanup(func() { outW.Close(); inR.Close() })
	return h, &relayEnd{toHost: outW, fromHost: inR}
}

// send may run on another goroutine: it reports with Error.
func (r *relayEnd) send(t *testing.T, f Frame) {
	t.Helper()
	if err := Write(r.toHost, f); err != nil {
		t.Error(err)
	}
}

func (r *relayEnd) read(t *testing.T) Frame {
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
	r.send(t, Frame{Type: Ready})
	<-h.Ready()
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

// TestHostMalformedEndsStream: a malformed frame ends Run and closes the
// listener.
func TestHostMalformedEndsStream(t *testing.T) {
	h, r := newPair(t)
	go func() { _, _ = r.toHost.Write([]byte{'X', 0, 0, 0, 0, 0, 0, 0, 0}) }()
	<-h.Done()
	if _, err := h.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after a malformed frame: %v", err)
	}
}
