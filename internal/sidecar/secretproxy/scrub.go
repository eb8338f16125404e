package secretproxy

import (
	"io"
	"strings"
)

// softCut: a possible match cut off by the end of what has arrived so far
// is held back until more bytes arrive when it already covers softCut
// bytes or more; a shorter one is let through at once (so that a stream
// whose chunk ends in a byte that could begin a match is never held up),
// and scrubbed from where the next bytes start if they complete it. What
// can leave unscrubbed that way is at most softCut-1 bytes of the
// beginning of a spelling of a value, and only when the upstream's writes
// split it there.
const softCut = 4

type matchStatus int

const (
	noMatch matchStatus = iota
	matched
	needMore
)

// scratch is a scanner's working memory (a patternSet is shared).
type scratch struct{ cur, next []int }

// matchAt tries every pattern at b[i:]. eof: nothing follows b. It
// returns the widest match (its start is before i when it has a lead),
// or needMore when a pattern could match with bytes past b (then also
// when another one matched: the longer one wins once known).
func (ps *patternSet) matchAt(b []byte, i int, eof bool, sc *scratch) (m region, st matchStatus) {
	m = region{start: i, end: -1}
	next := byte(0)
	if i+1 < len(b) {
		next = b[i+1]
	}
	for pi := range ps.pats {
		p := &ps.pats[pi]
		if !p.f0.has(b[i]) || (i+1 < len(b) && !p.f1.has(next)) {
			continue
		}
		e, cut := p.matchAt(b, i, sc)
		if cut && !eof {
			st = needMore
		}
		if e > m.end {
			m.end, m.secret = e, p.secret
		}
		if e >= 0 {
			m.start = min(m.start, i-p.leadLen(b, i))
		}
	}
	if st == needMore {
		return m, needMore
	}
	if m.end >= 0 {
		return m, matched
	}
	return m, noMatch
}

// matchAt follows every way p can match from b[i] (spellings of
// different lengths) and returns the farthest end of a complete match
// (-1 for none) and whether some way ran into the end of b.
func (p *pattern) matchAt(b []byte, i int, sc *scratch) (end int, cut bool) {
	cur := append(sc.cur[:0], i)
	next := sc.next[:0]
	end = -1
	for k := range p.elems {
		e := &p.elems[k]
		next = next[:0]
		for _, pos := range cur {
			if pos >= len(b) {
				cut = true
				continue
			}
			if e.one.has(b[pos]) {
				next = addPos(next, pos+1)
			}
			for _, m := range e.multi {
				rest := b[pos:]
				if len(rest) >= len(m) {
					if string(rest[:len(m)]) == m {
						next = addPos(next, pos+len(m))
					}
				} else if string(rest) == m[:len(rest)] {
					cut = true
				}
			}
		}
		cur, next = next, cur
		if len(cur) == 0 {
			break
		}
	}
	if len(cur) > 0 {
		for _, pos := range cur {
			end = max(end, pos)
		}
	}
	sc.cur, sc.next = cur[:0], next[:0]
	return end, cut
}

func addPos(s []int, p int) []int {
	for _, x := range s {
		if x == p {
			return s
		}
	}
	return append(s, p)
}

// skip returns the first position from i on where a match can begin
// (the filters, run on every byte; matchAt resolves false positives), or
// len(b).
func (ps *patternSet) skip(b []byte, i int) int {
	pairs := &ps.pairs
	for ; i+1 < len(b); i++ {
		x := uint16(b[i])<<8 | uint16(b[i+1])
		if pairs[x>>6]>>(x&63)&1 != 0 {
			return i
		}
	}
	if i < len(b) && !ps.first.has(b[i]) {
		i++
	}
	return i
}

// region is a stretch of the stream to scrub, in the scrubber's buffer.
type region struct{ start, end, secret int }

// scrubber finds every spelling of the values in a stream fed to it in
// pieces: a match split across pieces is found, whatever the split.
type scrubber struct {
	ps *patternSet
	sc scratch
	// buf holds the stream from min(scan, emitted) on, unchanged.
	buf []byte
	// emitted: buf[:emitted] was handed out; scan: every start before it
	// is resolved.
	emitted, scan int
	regions       []region
	held          bool // scan stopped at a long cut-off match
	// passAll: hand everything out at once (a request body, only looked
	// at for reporting).
	passAll bool
	// found is called for every match (the request side's report).
	found func(secret int)
}

// process scans what has arrived; eof: nothing more will. It returns
// where the bytes that may be handed out end.
func (s *scrubber) process(eof bool) int {
	b := s.buf
	s.held = false
	for s.scan < len(b) {
		s.scan = s.ps.skip(b, s.scan)
		if s.scan == len(b) {
			break
		}
		i := s.scan
		m, st := s.ps.matchAt(b, i, eof, &s.sc)
		if st == needMore && eof {
			st = noMatch
		}
		if st == needMore {
			s.held = len(b)-i >= softCut
			break
		}
		if st == noMatch && eof && len(b)-i >= softCut && s.cutAtEnd(i) {
			// A long beginning of a spelling ends the stream (a
			// truncated response): scrubbed as well.
			st, m = matched, region{i, len(b), m.secret}
		}
		if st == matched {
			s.addRegion(m)
		}
		s.scan++
	}
	if s.held && !s.passAll {
		// (A short beginning let through earlier may have grown.)
		return max(s.scan, s.emitted)
	}
	return len(b)
}

// cutAtEnd: a pattern follows b[i:] to its end.
func (s *scrubber) cutAtEnd(i int) bool {
	_, st := s.ps.matchAt(s.buf, i, false, &s.sc)
	return st == needMore
}

func (s *scrubber) addRegion(r region) {
	if s.found != nil {
		s.found(r.secret)
	}
	if n := len(s.regions); n > 0 && r.start <= s.regions[n-1].end {
		s.regions[n-1].start = min(s.regions[n-1].start, r.start)
		s.regions[n-1].end = max(s.regions[n-1].end, r.end)
		return
	}
	s.regions = append(s.regions, r)
}

// take copies buf[emitted:limit] into p with every region's bytes
// replaced by '*' (the length is kept: Content-Length stays true).
func (s *scrubber) take(p []byte, limit int) int {
	n := copy(p, s.buf[s.emitted:limit])
	if !s.passAll {
		from, to := s.emitted, s.emitted+n
		for _, r := range s.regions {
			for j := max(r.start, from); j < min(r.end, to); j++ {
				p[j-from] = '*'
			}
		}
	}
	s.emitted += n
	return n
}

// maxLead: compact keeps this many bytes before the scan for the leads
// of later matches.
const maxLead = 3

// compact drops what is no longer needed from buf.
func (s *scrubber) compact() {
	drop := min(s.emitted, s.scan) - maxLead
	if drop <= 0 {
		return
	}
	n := copy(s.buf, s.buf[drop:])
	s.buf = s.buf[:n]
	s.emitted -= drop
	s.scan -= drop
	rs := s.regions[:0]
	for _, r := range s.regions {
		if r.end > drop {
			r.start, r.end = max(r.start-drop, 0), r.end-drop
			rs = append(rs, r)
		}
	}
	s.regions = rs
}

// scrubReader scrubs a response body as it is read.
type scrubReader struct {
	src   io.Reader
	s     scrubber
	limit int // buf[emitted:limit] is ready
	err   error
	atEOF func() // called once src reports io.EOF (the trailers)
}

const readChunk = 32 << 10

func newScrubReader(src io.Reader, ps *patternSet, atEOF func()) *scrubReader {
	return &scrubReader{src: src, s: scrubber{ps: ps, buf: make([]byte, 0, readChunk)}, atEOF: atEOF}
}

func (r *scrubReader) Read(p []byte) (int, error) {
	for r.limit == r.s.emitted {
		if r.err != nil {
			return 0, r.err
		}
		r.fill()
	}
	return r.s.take(p, r.limit), nil
}

// fill reads once from src and scans what arrived.
func (r *scrubReader) fill() {
	r.s.compact()
	r.limit = r.s.emitted
	b := r.s.buf
	if cap(b)-len(b) < readChunk/2 {
		nb := make([]byte, len(b), 2*cap(b)+readChunk)
		copy(nb, b)
		b = nb
	}
	n, err := r.src.Read(b[len(b):cap(b)])
	r.s.buf = b[:len(b)+n]
	switch {
	case err == io.EOF:
		if r.atEOF != nil {
			r.atEOF()
		}
		r.err = err
		r.limit = r.s.process(true)
	case err != nil:
		// Cut short: what is held back (the beginning of a possible
		// match) never leaves.
		r.err = err
		r.limit = r.s.process(false)
	default:
		r.limit = r.s.process(false)
	}
}

// scrubString replaces every spelling of a value in s by its placeholder
// (headers: their length may change).
func (ps *patternSet) scrubString(v string) string {
	if len(ps.pats) == 0 || v == "" {
		return v
	}
	s := scrubber{ps: ps, buf: []byte(v)}
	s.process(true)
	if len(s.regions) == 0 {
		return v
	}
	var out strings.Builder
	at := 0
	for _, r := range s.regions {
		out.WriteString(v[at:r.start])
		out.WriteString(ps.repl[r.secret])
		at = r.end
	}
	out.WriteString(v[at:])
	return out.String()
}
