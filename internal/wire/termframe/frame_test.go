package termframe

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var b bytes.Buffer
	for _, p := range [][]byte{nil, []byte("hello"), bytes.Repeat([]byte{'x'}, MaxFrame)} {
		if err := WriteFrame(&b, 'o', p); err != nil {
			t.Fatal(err)
		}
		typ, got, err := ReadFrame(&b)
		if err != nil || typ != 'o' || !bytes.Equal(got, p) {
			t.Fatalf("got %q %d bytes %v", typ, len(got), err)
		}
	}
	if err := WriteFrame(&b, 'o', make([]byte, MaxFrame+1)); err == nil {
		t.Fatal("an oversized frame was written")
	}
	if b.Len() != 0 {
		t.Fatalf("the refused frame left %d bytes", b.Len())
	}
}

// TestFrameBounds: a claimed length above MaxFrame is refused before any
// allocation; a frame cut short is an unexpected EOF, not a short frame.
func TestFrameBounds(t *testing.T) {
	if _, _, err := ReadFrame(bytes.NewReader([]byte{'o', 0xff, 0xff, 0xff, 0xff})); !errors.Is(err, ErrFrameTooLong) {
		t.Fatalf("err = %v, want ErrFrameTooLong", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{'o', 0, 1, 0, 1})); !errors.Is(err, ErrFrameTooLong) {
		t.Fatalf("MaxFrame+1: err = %v, want ErrFrameTooLong", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{'o', 0, 0, 0, 9, 'a'})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{'o', 0, 0})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short header: err = %v, want unexpected EOF", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want EOF", err)
	}
}

func TestAppend(t *testing.T) {
	b := Append([]byte("x"), 'i', []byte("ab"))
	if want := []byte{'x', 'i', 0, 0, 0, 2, 'a', 'b'}; !bytes.Equal(b, want) {
		t.Fatalf("Append = %v, want %v", b, want)
	}
}

func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	_ = WriteFrame(&b, 'r', []byte{0, 24, 0, 80})
	_ = WriteFrame(&b, 'i', []byte("ls\r"))
	f.Add(b.Bytes())
	f.Add([]byte{'x', 0, 0, 0, 4, 0, 0, 0, 1})
	f.Add([]byte{'o', 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			typ, p, err := ReadFrame(r)
			if err != nil {
				return
			}
			if len(p) > MaxFrame {
				t.Fatalf("payload of %d bytes", len(p))
			}
			var again bytes.Buffer
			if err := WriteFrame(&again, typ, p); err != nil {
				t.Fatal(err)
			}
			if typ2, p2, err := ReadFrame(&again); err != nil || typ2 != typ || !bytes.Equal(p2, p) {
				t.Fatalf("round trip: %q %v", typ2, err)
			}
		}
	})
}
