package keeper

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var b bytes.Buffer
	for _, p := range [][]byte{nil, []byte("hello"), bytes.Repeat([]byte{'x'}, MaxFrame)} {
		if err := WriteFrame(&b, FrameOutput, p); err != nil {
			t.Fatal(err)
		}
		typ, got, err := ReadFrame(&b)
		if err != nil || typ != FrameOutput || !bytes.Equal(got, p) {
			t.Fatalf("got %q %d bytes %v", typ, len(got), err)
		}
	}
	if err := WriteFrame(&b, FrameOutput, make([]byte, MaxFrame+1)); err == nil {
		t.Fatal("an oversized frame was written")
	}
}

// TestFrameBounds: a claimed length above MaxFrame is refused before any
// allocation; a frame cut short is an unexpected EOF, not a short frame.
func TestFrameBounds(t *testing.T) {
	if _, _, err := ReadFrame(bytes.NewReader([]byte{'o', 0xff, 0xff, 0xff, 0xff})); !errors.Is(err, ErrFrameTooLong) {
		t.Fatalf("err = %v, want ErrFrameTooLong", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{'o', 0, 0, 0, 9, 'a'})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", err)
	}
	if _, _, err := ReadFrame(bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want EOF", err)
	}
}

func TestSizeAndExit(t *testing.T) {
	s, err := decodeSize(encodeSize(Size{Rows: 40, Cols: 150}))
	if err != nil || s != (Size{40, 150}) {
		t.Fatalf("%v %v", s, err)
	}
	for _, bad := range []Size{{0, 80}, {24, 0}, {maxSide + 1, 80}} {
		if _, err := decodeSize(encodeSize(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if c, err := decodeExit(encodeExit(-1)); err != nil || c != -1 {
		t.Fatalf("%d %v", c, err)
	}
}

func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	_ = WriteFrame(&b, FrameResize, encodeSize(Size{24, 80}))
	_ = WriteFrame(&b, FrameInput, []byte("ls\r"))
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
			switch typ {
			case FrameResize:
				if s, err := decodeSize(p); err == nil && (s.Rows == 0 || s.Cols > maxSide) {
					t.Fatalf("size %v accepted", s)
				}
			case FrameExit:
				_, _ = decodeExit(p)
			}
			var again bytes.Buffer
			if err := WriteFrame(&again, typ, p); err != nil {
				t.Fatal(err)
			}
		}
	})
}
