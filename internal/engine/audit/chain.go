package audit

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// A stored record is the entry's hex hash, a newline, and its canonical
// encoding. Keeping the entry's own hash beside it lets verification name
// an edited entry itself rather than only its successor.
const hashLen = 64

// EncodeRecord returns the stored form of a sealed entry.
func EncodeRecord(hash string, body []byte) []byte {
	rec := make([]byte, 0, hashLen+1+len(body))
	rec = append(rec, hash...)
	rec = append(rec, '\n')
	return append(rec, body...)
}

// DecodeRecord splits a stored record into the hash it claims and the
// canonical encoding.
func DecodeRecord(rec []byte) (hash string, body []byte, err error) {
	if len(rec) < hashLen+1 || rec[hashLen] != '\n' {
		return "", nil, fmt.Errorf("record of %d bytes has no hash header", len(rec))
	}
	if _, err := hex.DecodeString(string(rec[:hashLen])); err != nil {
		return "", nil, fmt.Errorf("record hash is not hex")
	}
	return string(rec[:hashLen]), rec[hashLen+1:], nil
}

// Problem is the first entry at which a chain fails verification.
type Problem struct {
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

func (p *Problem) Error() string { return fmt.Sprintf("audit entry %d: %s", p.Seq, p.Reason) }

// Head is the last sequence number and hash of a chain, recorded by the
// store in the same transaction as each append so that removing entries
// from the end is detected too.
type Head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// Report is the outcome of verifying a chain.
type Report struct {
	Entries uint64   `json:"entries"`
	Head    Head     `json:"head"`
	Problem *Problem `json:"problem,omitempty"`
}

// OK reports whether the chain verified.
func (r Report) OK() bool { return r.Problem == nil }

// Verifier checks records fed in key order. The first problem found is
// kept; later records are ignored.
type Verifier struct {
	n        uint64
	prevSeq  uint64
	prevHash string
	problem  *Problem
}

// NewVerifier returns a Verifier expecting the chain to start at seq 1.
func NewVerifier() *Verifier { return &Verifier{prevHash: GenesisPrev} }

func (v *Verifier) fail(seq uint64, format string, args ...any) bool {
	v.problem = &Problem{Seq: seq, Reason: fmt.Sprintf(format, args...)}
	return false
}

// Add checks the record stored under key. It returns false once a problem
// has been found, so callers can stop reading.
func (v *Verifier) Add(key uint64, rec []byte) bool {
	if v.problem != nil {
		return false
	}
	want := v.prevSeq + 1
	switch {
	case key < want:
		return v.fail(key, "stored out of order after entry %d", v.prevSeq)
	case key > want:
		if want == key-1 {
			return v.fail(want, "missing: the chain jumps from entry %d to %d (entry deleted)", v.prevSeq, key)
		}
		return v.fail(want, "missing: the chain jumps from entry %d to %d (entries %d-%d deleted)", v.prevSeq, key, want, key-1)
	}
	claimed, body, err := DecodeRecord(rec)
	if err != nil {
		return v.fail(key, "unreadable: %v", err)
	}
	actual := Sum(body)
	if actual != claimed {
		return v.fail(key, "content does not match its hash (entry edited)")
	}
	// Only the chain fields are needed here; decoding the whole entry
	// would double the cost of verifying a long trail.
	var e struct {
		Seq  uint64  `json:"seq"`
		Prev string  `json:"prev"`
		Hash *string `json:"hash"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return v.fail(key, "unreadable: %v", err)
	}
	if e.Hash != nil {
		return v.fail(key, "unreadable: canonical encoding carries a hash")
	}
	if e.Seq != key {
		return v.fail(key, "holds the entry with seq %d (entries reordered or moved)", e.Seq)
	}
	if e.Prev != v.prevHash {
		if key == 1 {
			return v.fail(key, "first entry does not start the chain (prev is not the genesis hash)")
		}
		return v.fail(key, "prev does not match the hash of entry %d (that entry was replaced or rehashed)", v.prevSeq)
	}
	v.n++
	v.prevSeq, v.prevHash = key, actual
	return true
}

// Finish compares the chain read so far with the recorded head and returns
// the report. head is nil when the store has none (an empty trail).
func (v *Verifier) Finish(head *Head) Report {
	r := Report{Entries: v.n, Head: Head{Seq: v.prevSeq, Hash: v.prevHash}, Problem: v.problem}
	if v.problem != nil {
		return r
	}
	if v.n == 0 {
		r.Head.Hash = ""
	}
	switch {
	case head == nil && v.n > 0:
		r.Problem = &Problem{Seq: v.prevSeq, Reason: "the chain head record is missing"}
	case head == nil:
	case head.Seq > v.prevSeq:
		r.Problem = &Problem{Seq: v.prevSeq + 1, Reason: fmt.Sprintf("missing: the chain ends at entry %d but the head records entry %d (entries deleted from the end)", v.prevSeq, head.Seq)}
	case head.Seq < v.prevSeq:
		r.Problem = &Problem{Seq: head.Seq + 1, Reason: fmt.Sprintf("not covered by the chain head, which records entry %d (entries added outside lazaret)", head.Seq)}
	case head.Seq > 0 && head.Hash != v.prevHash:
		r.Problem = &Problem{Seq: v.prevSeq, Reason: "does not match the hash recorded in the chain head (entry replaced)"}
	}
	return r
}
