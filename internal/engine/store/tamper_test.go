package store

import (
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

// Test-only helpers that edit a closed state store file directly with
// bbolt, the way an attacker with write access to the file would, to prove
// that Verify notices.

func rawUpdate(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// tamperEdit changes entry seq's profile. With rehash it also rewrites the
// stored hash so the record is self-consistent (the break then shows at
// the next entry's prev link).
func tamperEdit(t *testing.T, path string, seq uint64, rehash bool) {
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		h, body, err := audit.DecodeRecord(b.Get(seqKey(seq)))
		if err != nil {
			return err
		}
		e, err := audit.Decode(body)
		if err != nil {
			return err
		}
		e.Profile = "forged"
		nb, err := e.Canonical()
		if err != nil {
			return err
		}
		if rehash {
			h = audit.Sum(nb)
		}
		return b.Put(seqKey(seq), audit.EncodeRecord(h, nb))
	})
}

func tamperDelete(t *testing.T, path string, seq uint64) {
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketAudit).Delete(seqKey(seq)) })
}

// tamperSwap exchanges the records stored under a and b.
func tamperSwap(t *testing.T, path string, a, b uint64) {
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketAudit)
		va := append([]byte(nil), bk.Get(seqKey(a))...)
		vb := append([]byte(nil), bk.Get(seqKey(b))...)
		if err := bk.Put(seqKey(a), vb); err != nil {
			return err
		}
		return bk.Put(seqKey(b), va)
	})
}
