// Package storetest edits a closed state store file directly, the way an
// attacker with write access to the file would, so that tests outside
// package store can prove `lazaret audit verify` notices. Import it only
// from tests. (Package store's own tests have the same helpers in
// tamper_test.go.)
package storetest

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

// The layout written by package store (schema 2), repeated here on purpose:
// a tamperer works from the file, not from the store's code.
var bucketAudit = []byte("audit_v1")

func key(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func update(path string, fn func(b *bolt.Bucket) error) error {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return fmt.Errorf("%s: no audit bucket", path)
		}
		return fn(b)
	})
}

// EditEntry applies edit to entry seq and stores it back. With rehash the
// stored hash is recomputed, so only the next entry's link shows the edit.
func EditEntry(path string, seq uint64, rehash bool, edit func(*audit.Entry)) error {
	return update(path, func(b *bolt.Bucket) error {
		h, body, err := audit.DecodeRecord(b.Get(key(seq)))
		if err != nil {
			return err
		}
		e, err := audit.Decode(body)
		if err != nil {
			return err
		}
		edit(&e)
		nb, err := e.Canonical()
		if err != nil {
			return err
		}
		if rehash {
			h = audit.Sum(nb)
		}
		return b.Put(key(seq), audit.EncodeRecord(h, nb))
	})
}

// DeleteEntry removes entry seq.
func DeleteEntry(path string, seq uint64) error {
	return update(path, func(b *bolt.Bucket) error { return b.Delete(key(seq)) })
}

// SwapEntries exchanges the records stored under a and b.
func SwapEntries(path string, a, b uint64) error {
	return update(path, func(bk *bolt.Bucket) error {
		va := append([]byte(nil), bk.Get(key(a))...)
		vb := append([]byte(nil), bk.Get(key(b))...)
		if err := bk.Put(key(a), vb); err != nil {
			return err
		}
		return bk.Put(key(b), va)
	})
}
