package podkeep

// ring keeps the last len(buf) bytes of the session's output; offsets
// are absolute (bytes since the command started).
type ring struct {
	buf []byte
	end uint64 // the offset after the last byte written
}

func newRing(size int) *ring { return &ring{buf: make([]byte, size)} }

// start is the oldest offset still kept.
func (r *ring) start() uint64 {
	if n := uint64(len(r.buf)); r.end > n {
		return r.end - n
	}
	return 0
}

// write appends p, forgetting the oldest bytes beyond the ring's size.
func (r *ring) write(p []byte) {
	size := len(r.buf)
	if len(p) > size {
		r.end += uint64(len(p) - size)
		p = p[len(p)-size:]
	}
	for len(p) > 0 {
		at := int(r.end % uint64(size))
		n := copy(r.buf[at:], p)
		r.end += uint64(n)
		p = p[n:]
	}
}

// read copies at most max bytes from off on; off must be within
// [start, end].
func (r *ring) read(off uint64, max int) []byte {
	n := min(r.end-off, uint64(max))
	out := make([]byte, 0, n)
	size := uint64(len(r.buf))
	for uint64(len(out)) < n {
		at := (off + uint64(len(out))) % size
		out = append(out, r.buf[at:min(size, at+n-uint64(len(out)))]...)
	}
	return out
}
