package secretproxy

import "slices"

// The spellings of a secret's value that the response scrubber looks for
// (docs/SECRETS.md, "What is scrubbed"). Each is a pattern: a sequence of
// elements, one per byte or character of the value's encoding, each a set
// of single bytes and a few longer spellings. The patterns of one value:
//
//   - text: the value in any letter case, each byte either as it is or
//     percent-encoded (%xx, either hex case; '+' for a space), JSON- or
//     JavaScript-escaped (\u00xx, \xXX, \" \\ \/ \b \f \t) or HTML-escaped
//     (&amp; &lt; &gt; &quot; &#34; &#39; &#x27;), mixed freely;
//   - hex: two hex digits per byte, either case, of the value in any case;
//   - base64 at each of the three alignments a value can have inside a
//     longer base64 string: the characters that carry any bit of the
//     value, the two edge characters that also carry bits of the bytes
//     around it included (any value of those bits), standard and URL
//     alphabet, any letter case (of the value and of the encoding), '+'
//     and '/' also percent-encoded or JSON-escaped. Padding is outside the
//     pattern (it carries no bit).
//
// One layer of encoding is matched, not encodings of encodings (base64
// of the percent-encoded value), nor a value cut by line breaks.

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]>>(b&63)&1 != 0 }

// element is one position of a pattern: a byte of one, or a longer
// spelling (at least two bytes) out of multi.
type element struct {
	one   byteSet
	multi []string
}

func (e *element) addMulti(s string) {
	if len(s) == 1 {
		e.one.add(s[0])
		return
	}
	for _, m := range e.multi {
		if m == s {
			return
		}
	}
	e.multi = append(e.multi, s)
}

// firsts are the bytes a match of e begins with.
func (e *element) firsts() byteSet {
	s := e.one
	for _, m := range e.multi {
		s.add(m[0])
	}
	return s
}

type pattern struct {
	elems []element
	// lead, when set, is a character just before elems that carries some
	// bits of the value and some of the bytes before it (a base64
	// alignment's first character): scrubbed with a match when it is
	// there, but not part of it, so that the filters look at the value's
	// own characters (a lead matches a quarter of all characters).
	lead   *element
	secret int
	// f0, f1: the bytes a match's first and second byte can be.
	f0, f1 byteSet
}

// caseVariants are b and, for a letter, its other case.
func caseVariants(b byte) []byte {
	switch {
	case b >= 'a' && b <= 'z':
		return []byte{b, b - 32}
	case b >= 'A' && b <= 'Z':
		return []byte{b, b + 32}
	}
	return []byte{b}
}

// hexCases are the two hex digits of b in every mix of letter cases.
func hexCases(b byte) []string {
	const lower, upper = "0123456789abcdef", "0123456789ABCDEF"
	var out []string
	for _, h := range []byte{lower[b>>4], upper[b>>4]} {
		for _, l := range []byte{lower[b&15], upper[b&15]} {
			if s := string([]byte{h, l}); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// escapes are the JSON and HTML spellings of the bytes that have one.
var escapes = map[byte][]string{
	'"':  {`\"`, "&quot;", "&#34;", "&#x22;"},
	'\\': {`\\`},
	'\b': {`\b`},
	'\f': {`\f`},
	'\t': {`\t`},
	'/':  {`\/`},
	'&':  {"&amp;", "&#38;", "&#x26;"},
	'<':  {"&lt;", "&#60;", "&#x3c;", "&#x3C;"},
	'>':  {"&gt;", "&#62;", "&#x3e;", "&#x3E;"},
	'\'': {"&#39;", "&#x27;", "&apos;"},
}

func textPattern(v string, secret int) pattern {
	p := pattern{secret: secret, elems: make([]element, len(v))}
	for i := 0; i < len(v); i++ {
		e := &p.elems[i]
		switch v[i] {
		case ' ':
			e.one.add('+')
		case '+':
			e.one.add(' ')
		}
		for _, c := range caseVariants(v[i]) {
			e.one.add(c)
			for _, hh := range hexCases(c) {
				e.addMulti("%" + hh)
				e.addMulti(`\u00` + hh)
				e.addMulti(`\x` + hh)
			}
			for _, s := range escapes[c] {
				e.addMulti(s)
			}
		}
	}
	return p
}

func hexPattern(v string, secret int) pattern {
	const lower, upper = "0123456789abcdef", "0123456789ABCDEF"
	p := pattern{secret: secret, elems: make([]element, 2*len(v))}
	for i := 0; i < len(v); i++ {
		for _, c := range caseVariants(v[i]) {
			for _, digits := range []string{lower, upper} {
				p.elems[2*i].one.add(digits[c>>4])
				p.elems[2*i+1].one.add(digits[c&15])
			}
		}
	}
	return p
}

const (
	b64Std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
)

// base64Pattern matches the base64 characters that carry bits of v when v
// starts shift bytes (0–2) into a group of three.
func base64Pattern(v string, shift, secret int) pattern {
	p := pattern{secret: secret}
	off := 8 * shift // bit offset of v's first bit
	first, last := off/6, (off+8*len(v)-1)/6
	for k := first; k <= last; k++ {
		var e element
		for _, x := range base64Values(v, off, k) {
			for _, c := range []byte{b64Std[x], b64URL[x]} {
				for _, cv := range caseVariants(c) {
					e.one.add(cv)
				}
				switch c {
				case '+':
					e.one.add(' ')
					e.addMulti("%2B")
					e.addMulti("%2b")
				case '/':
					e.addMulti("%2F")
					e.addMulti("%2f")
					e.addMulti(`\/`)
				}
			}
		}
		p.elems = append(p.elems, e)
	}
	if shift > 0 && len(p.elems) > 1 {
		p.lead, p.elems = &p.elems[0], p.elems[1:]
	}
	return p
}

// base64Values are the 6-bit values character k can take: its bits that
// come from v (any letter case of v's bytes) fixed, the others free.
func base64Values(v string, off, k int) []int {
	type src struct{ byteIdx, bit int } // byteIdx -1: a bit of a neighbour
	var bits [6]src
	var idx []int // the bytes of v this character draws on
	for i := range bits {
		t := 6*k + i - off
		if t < 0 || t >= 8*len(v) {
			bits[i] = src{-1, 0}
			continue
		}
		bits[i] = src{t / 8, 7 - t%8}
		if len(idx) == 0 || idx[len(idx)-1] != t/8 {
			idx = append(idx, t/8)
		}
	}
	var vars [][]byte
	for _, j := range idx {
		vars = append(vars, caseVariants(v[j]))
	}
	seen := map[int]bool{}
	var out []int
	combos := 1
	for _, vs := range vars {
		combos *= len(vs)
	}
	for c := range combos {
		chosen := map[int]byte{}
		r := c
		for n, j := range idx {
			chosen[j] = vars[n][r%len(vars[n])]
			r /= len(vars[n])
		}
		for free := range 64 {
			x := 0
			for i, b := range bits {
				bit := free >> (5 - i) & 1
				if b.byteIdx >= 0 {
					bit = int(chosen[b.byteIdx]>>b.bit) & 1
				}
				x = x<<1 | bit
			}
			if !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
		}
	}
	return out
}

// patternSet is every pattern of a set of values, with the filters the
// scanner runs on every byte: the bytes a match can begin with and the
// pairs of bytes it can begin with (65536 bits).
type patternSet struct {
	pats  []pattern
	first byteSet
	pairs [1024]uint64
	// repl[secret] replaces a match in a header: the placeholder.
	repl []string
}

// newPatternSet builds the patterns of every value; repl[i] is what a
// match of values[i] becomes in a header.
func newPatternSet(values, repl []string, forms func(v string, i int) []pattern) *patternSet {
	ps := &patternSet{repl: repl}
	for i, v := range values {
		if v == "" {
			continue
		}
		ps.pats = append(ps.pats, forms(v, i)...)
	}
	for i := range ps.pats {
		p := &ps.pats[i]
		p.f0 = p.elems[0].firsts()
		p.f1 = byteSet{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
		if len(p.elems) > 1 {
			p.f1 = p.elems[1].firsts()
			for _, m := range p.elems[0].multi {
				p.f1.add(m[1])
			}
		}
		ps.addPairs(*p)
	}
	return ps
}

// leadLen is how many bytes just before b[i] are p's lead (0: none).
func (p *pattern) leadLen(b []byte, i int) int {
	if p.lead == nil || i == 0 {
		return 0
	}
	if p.lead.one.has(b[i-1]) {
		return 1
	}
	for _, m := range p.lead.multi {
		if i >= len(m) && string(b[i-len(m):i]) == m {
			return len(m)
		}
	}
	return 0
}

func (ps *patternSet) addPairs(p pattern) {
	e0 := &p.elems[0]
	f0 := e0.firsts()
	for b := range 256 {
		if !f0.has(byte(b)) {
			continue
		}
		ps.first.add(byte(b))
		if !e0.one.has(byte(b)) {
			continue
		}
		var next byteSet
		if len(p.elems) == 1 {
			next = byteSet{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
		} else {
			next = p.elems[1].firsts()
		}
		for n := range 256 {
			if next.has(byte(n)) {
				ps.setPair(byte(b), byte(n))
			}
		}
	}
	for _, m := range e0.multi {
		ps.setPair(m[0], m[1])
	}
}

func (ps *patternSet) setPair(a, b byte) {
	x := uint16(a)<<8 | uint16(b)
	ps.pairs[x>>6] |= 1 << (x & 63)
}

// valueForms are the patterns of a secret's value in a response.
func valueForms(v string, i int) []pattern {
	return []pattern{textPattern(v, i), hexPattern(v, i),
		base64Pattern(v, 0, i), base64Pattern(v, 1, i), base64Pattern(v, 2, i)}
}

// placeholderForms: a placeholder in a request body is looked for as
// text (any case, percent- or JSON-escaped).
func placeholderForms(v string, i int) []pattern { return []pattern{textPattern(v, i)} }
