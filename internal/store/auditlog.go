package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/lazaret-dev/lazaret/internal/audit"
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
		seq = n
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("append audit entry (%s): %w", e.Kind, err)
	}
	return seq, nil
}

// Audit returns the entries matching f in sequence order (see audit.Filter
// for Last and Limit). Entries are read
// without verifying the chain (see Verify); an unreadable record is an
// error naming its sequence number.
func (s *Store) Audit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	var out []audit.Entry
	err := s.read(ctx, func(tx *bolt.Tx) error {
		out = nil
		c := tx.Bucket(bucketAudit).Cursor()
		parse := func(k, v []byte) (audit.Entry, error) {
			e, err := audit.ParseRecord(v)
			if err != nil {
				return e, fmt.Errorf("audit entry %d: %w (run `lazaret audit verify`)", binary.BigEndian.Uint64(k), err)
			}
			return e, nil
		}
		if f.Last > 0 {
			// Walk back from the end: the common "recent entries" query
			// costs what it shows, not the size of the trail.
			for k, v := c.Last(); k != nil && len(out) < f.Last; k, v = c.Prev() {
				if binary.BigEndian.Uint64(k) <= f.AfterSeq {
					break
				}
				e, err := parse(k, v)
				if err != nil {
					return err
				}
				if f.Match(&e) {
					out = append(out, e)
				}
			}
			slices.Reverse(out)
			return nil
		}
		for k, v := c.Seek(seqKey(f.AfterSeq + 1)); k != nil && (f.Limit <= 0 || len(out) < f.Limit); k, v = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			e, err := parse(k, v)
			if err != nil {
				return err
			}
			if f.Match(&e) {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
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
