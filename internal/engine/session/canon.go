package session

import "encoding/binary"

// Canonical encoding, version 1. Signatures in lazaret are made over this
// encoding, never over JSON (whose field order, escaping and number forms
// vary between encoders). It is deterministic and unambiguous:
//
//	encoding = tag 0x00 field*
//	tag      = ASCII domain-separation string naming the signed type and
//	           its version ("lazaret/delegation/v1", "lazaret/request/v1"),
//	           so a signature over one type can never pass as another
//	string   = uint32 big-endian byte length, then the bytes (also for
//	           raw byte fields such as keys)
//	int64    = 8 bytes big-endian two's complement
//	list     = uint8 presence (0 absent, 1 present), and when present a
//	           uint32 big-endian element count, then each element as string
//
// Fields are written in the fixed order documented at each Canonical
// method; no field is optional except lists, which carry their presence.

// Encoder builds a canonical encoding.
type Encoder struct{ b []byte }

// NewEncoder starts an encoding with its domain-separation tag.
func NewEncoder(tag string) *Encoder {
	e := &Encoder{b: make([]byte, 0, 256)}
	e.b = append(e.b, tag...)
	e.b = append(e.b, 0)
	return e
}

// String appends a length-prefixed string.
func (e *Encoder) String(s string) *Encoder {
	e.b = binary.BigEndian.AppendUint32(e.b, uint32(len(s)))
	e.b = append(e.b, s...)
	return e
}

// Bytes appends length-prefixed raw bytes.
func (e *Encoder) Bytes(p []byte) *Encoder {
	e.b = binary.BigEndian.AppendUint32(e.b, uint32(len(p)))
	e.b = append(e.b, p...)
	return e
}

// Int64 appends a fixed-width integer.
func (e *Encoder) Int64(v int64) *Encoder {
	e.b = binary.BigEndian.AppendUint64(e.b, uint64(v))
	return e
}

// List appends a list of strings with its presence marker; a nil list is
// absent, an empty non-nil list is present with zero elements.
func (e *Encoder) List(l []string) *Encoder {
	if l == nil {
		e.b = append(e.b, 0)
		return e
	}
	e.b = append(e.b, 1)
	e.b = binary.BigEndian.AppendUint32(e.b, uint32(len(l)))
	for _, s := range l {
		e.String(s)
	}
	return e
}

// Sum returns the encoding.
func (e *Encoder) Sum() []byte { return e.b }
