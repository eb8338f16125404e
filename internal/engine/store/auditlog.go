package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

// seqKey is the bucket key of seq: big-endian, so key order is seq order.
func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func readHead(tx *bolt.Tx) (*audit.Head, error) {
	v := tx.Bucket(bucketMeta).Get(keyAuditHead)
	if v == nil {
		return nil, nil
	}
	var h audit.Head
	if err := json.Unmarshal(v, &h); err != nil {
		return nil, fmt.Errorf("audit head: %w", err)
	}
	return &h, nil
}

// AppendAudit seals e into the chain (sequence number from the bucket's
// NextSequence, prev = hash of the last entry, its own hash) and commits it
// with fsync before returning its sequence number. An entry without a time
// gets the current time. An invalid entry (see audit.Entry.Validate) is
// refused before it reaches the queue.
func (s *Store) AppendAudit(ctx context.Context, e audit.Entry) (uint64, error) {
	if err := e.Validate(); err != nil {
		return 0, err
	}
	if e.Time.IsZero() {
		e.Time = s.opts.Now()
	}
	var seq uint64
	err := s.write(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		// Keys only ever grow: fill pages instead of splitting them in
		// half (bbolt's default suits random inserts), which halves the
		// file.
		b.FillPercent = 1.0
		n, err := b.NextSequence()
		if err != nil {
			return err
		}
		prev := audit.GenesisPrev
		head, err := readHead(tx)
		if err != nil {
			return err
		}
		if head != nil {
			prev = head.Hash
		}
		entry := e
		body, err := audit.Seal(&entry, n, prev)
		if err != nil {
			return err
		}
		if err := b.Put(seqKey(n), audit.EncodeRecord(entry.Hash, body)); err != nil {
			return err
		}
		h, err := json.Marshal(audit.Head{Seq: n, Hash: entry.Hash})
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put(keyAuditHead, h); err != nil {
			return err
		}
		if err := trackEscalation(tx, &entry); err != nil {
			return err
		}
		seq = n
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("append audit entry (%s): %w", e.Kind, err)
	}
	return seq, nil
}

// Audit returns the entries matching f in sequence order (see audit.Filter
// for Last and Limit). Entries are read without verifying the chain (see
// Verify); an unreadable record is an error naming its sequence number.
func (s *Store) Audit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	var out []audit.Entry
	err := s.read(ctx, func(tx *bolt.Tx) error {
		out = nil
		return scanAudit(ctx, tx, f, func(_ uint64, _ string, body []byte) (bool, error) {
			e, err := audit.Decode(body)
			if err != nil || !f.Match(&e) {
				return false, err
			}
			out = append(out, e)
			return true, nil
		})
	})
	if f.Last > 0 {
		slices.Reverse(out)
	}
	return out, err
}

// AuditJSON is Audit returning each entry as its JSON object (the stored
// canonical encoding with the hash added; it decodes to what Audit
// returns). Entries are decoded only as far as the filter looks, which
// makes serving a query to another process about twice as cheap.
func (s *Store) AuditJSON(ctx context.Context, f audit.Filter) ([]json.RawMessage, error) {
	var out []json.RawMessage
	needLook := f.Profile != "" || !f.Since.IsZero() || len(f.Kinds) > 0
	err := s.read(ctx, func(tx *bolt.Tx) error {
		out = nil
		return scanAudit(ctx, tx, f, func(_ uint64, hash string, body []byte) (bool, error) {
			if needLook {
				var e audit.Entry
				var look struct {
					Time    time.Time  `json:"time"`
					Kind    audit.Kind `json:"kind"`
					Profile string     `json:"profile"`
				}
				if err := json.Unmarshal(body, &look); err != nil {
					return false, err
				}
				e.Time, e.Kind, e.Profile = look.Time, look.Kind, look.Profile
				if !f.Match(&e) {
					return false, nil
				}
			}
			if len(body) < 2 || body[len(body)-1] != '}' {
				return false, fmt.Errorf("not a JSON object")
			}
			// The canonical encoding omits only the hash, the last
			// field of audit.Entry.
			j := make([]byte, 0, len(body)+len(hash)+10)
			j = append(j, body[:len(body)-1]...)
			j = append(j, `,"hash":"`...)
			j = append(j, hash...)
			j = append(j, `"}`...)
			out = append(out, j)
			return true, nil
		})
	})
	if f.Last > 0 {
		slices.Reverse(out)
	}
	return out, err
}

// scanAudit walks the records f selects by sequence (AfterSeq, Last,
// Limit) and calls take with each one's sequence number, actual hash and
// canonical encoding; take reports whether it kept the entry (Last and
// Limit count kept entries). For Last, records are walked back from the
// end (newest first: the caller reverses), so the common "recent entries"
// query costs what it shows, not the size of the trail.
func scanAudit(ctx context.Context, tx *bolt.Tx, f audit.Filter, take func(seq uint64, hash string, body []byte) (bool, error)) error {
	c := tx.Bucket(bucketAudit).Cursor()
	kept := 0
	visit := func(k, v []byte) error {
		seq := binary.BigEndian.Uint64(k)
		_, body, err := audit.DecodeRecord(v)
		if err == nil {
			var ok bool
			ok, err = take(seq, audit.Sum(body), body)
			if ok {
				kept++
			}
		}
		if err != nil {
			return fmt.Errorf("audit entry %d: %w (run `lazaret audit verify`)", seq, err)
		}
		return nil
	}
	if f.Last > 0 {
		for k, v := c.Last(); k != nil && kept < f.Last; k, v = c.Prev() {
			if binary.BigEndian.Uint64(k) <= f.AfterSeq {
				break
			}
			if err := visit(k, v); err != nil {
				return err
			}
		}
		return nil
	}
	for k, v := c.Seek(seqKey(f.AfterSeq + 1)); k != nil && (f.Limit <= 0 || kept < f.Limit); k, v = c.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := visit(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Verify checks the whole chain: every record's hash, the sequence without
// gaps or reordering, each prev link, and the head recorded at the last
// append. The report names the first bad entry; the error is only for a
// store that could not be read.
func (s *Store) Verify(ctx context.Context) (audit.Report, error) {
	var r audit.Report
	err := s.read(ctx, func(tx *bolt.Tx) error {
		v := audit.NewVerifier()
		c := tx.Bucket(bucketAudit).Cursor()
		for k, rec := c.First(); k != nil; k, rec = c.Next() {
			if len(k) != 8 {
				r = audit.Report{Problem: &audit.Problem{Reason: fmt.Sprintf("foreign key %x in the audit bucket", k)}}
				return nil
			}
			if !v.Add(binary.BigEndian.Uint64(k), rec) {
				break
			}
		}
		head, err := readHead(tx)
		if err != nil {
			r = v.Finish(nil)
			if r.Problem == nil {
				r.Problem = &audit.Problem{Seq: r.Head.Seq, Reason: err.Error()}
			}
			return nil
		}
		r = v.Finish(head)
		return nil
	})
	return r, err
}
