package podkeep

import (
	"bytes"
	"testing"
)

// TestRing checks the ring against a plain copy of everything written,
// across wraps and writes larger than the ring.
func TestRing(t *testing.T) {
	r := newRing(7)
	var all []byte
	for i, n := range []int{3, 3, 3, 10, 1, 6, 7, 0, 2} {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte('a' + (i*5+j)%26)
		}
		r.write(p)
		all = append(all, p...)
		if r.end != uint64(len(all)) {
			t.Fatalf("end = %d, want %d", r.end, len(all))
		}
		if want := max(0, len(all)-7); r.start() != uint64(want) {
			t.Fatalf("start = %d, want %d", r.start(), want)
		}
		for off := r.start(); off <= r.end; off++ {
			for _, m := range []int{1, 4, 100} {
				got := r.read(off, m)
				want := all[off:min(uint64(len(all)), off+uint64(m))]
				if !bytes.Equal(got, want) {
					t.Fatalf("read(%d, %d) = %q, want %q", off, m, got, want)
				}
			}
		}
	}
}
