package escrelay

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var b bytes.Buffer
	in := []Frame{{Type: Open, ID: 1}, {Type: Data, ID: 1, Payload: []byte("hello")}, {Type: Close, ID: 1}, {Type: Bundle, Payload: []byte("pem")}, {Type: Ready},
		{Type: Resume, Payload: EncodeResume([]ResumeEntry{{1, 5}, {1 << 31, 1 << 40}})}, {Type: Resume}, {Type: End}}
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
		"resume, odd size":  {Resume, 0, 0, 0, 0, 0, 0, 0, 13},
		"resume, too many":  {Resume, 0, 0, 0, 0, 0, 0, 0x01, 0x8c}, // (MaxConns+1)*12
	} {
		if _, err := Read(bytes.NewReader(raw)); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: %v, want ErrFrame", name, err)
		}
	}
	if err := Write(io.Discard, Frame{Type: Data, Payload: make([]byte, MaxPayload+1)}); !errors.Is(err, ErrFrame) {
		t.Errorf("Write of an oversized payload: %v", err)
	}
	for _, n := range []int{resumeEntryLen + 1, (MaxConns + 1) * resumeEntryLen} {
		if err := Write(io.Discard, Frame{Type: Resume, Payload: make([]byte, n)}); !errors.Is(err, ErrFrame) {
			t.Errorf("Write of a resume of %d bytes: %v", n, err)
		}
	}
	full := append([]byte{Resume, 0, 0, 0, 0, 0, 0, 0x01, 0x80}, make([]byte, MaxConns*resumeEntryLen)...)
	if f, err := Read(bytes.NewReader(full)); err != nil || len(DecodeResume(f.Payload)) != MaxConns {
		t.Errorf("a resume of MaxConns entries: %v", err)
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
	b.Reset()
	_ = Write(&b, Frame{Type: Resume, Payload: EncodeResume([]ResumeEntry{{1, 9}, {2, 0}})})
	_ = Write(&b, Frame{Type: End})
	f.Add(b.Bytes())
	f.Add([]byte{Resume, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0})
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
