package keeper

import (
	"bytes"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

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

// FuzzKeeperFrames: the keeper's payload decoders on whatever frames
// a client sends (the codec itself is fuzzed in termframe).
func FuzzKeeperFrames(f *testing.F) {
	var b bytes.Buffer
	_ = termframe.WriteFrame(&b, FrameResize, encodeSize(Size{24, 80}))
	_ = termframe.WriteFrame(&b, FrameInput, []byte("ls\r"))
	f.Add(b.Bytes())
	f.Add([]byte{'x', 0, 0, 0, 4, 0, 0, 0, 1})
	f.Add([]byte{'o', 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			typ, p, err := termframe.ReadFrame(r)
			if err != nil {
				return
			}
			switch typ {
			case FrameResize:
				if s, err := decodeSize(p); err == nil && (s.Rows == 0 || s.Cols > maxSide) {
					t.Fatalf("size %v accepted", s)
				}
			case FrameExit:
				_, _ = decodeExit(p)
			}
		}
	})
}
