package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Buckets are versioned tables: a change of a bucket's value format is a
// new bucket name and a migration, never an in-place reinterpretation.
var (
	bucketMeta          = []byte("meta")
	bucketSessionsV1    = []byte("sessions_v1")
	bucketSessionsV2    = []byte("sessions_v2")
	bucketEscalationsV1 = []byte("escalations_v1")
	bucketAuditV1       = []byte("audit_v1")

	keySchemaVersion = []byte("schema_version")
	keyAuditHead     = []byte("audit_head")
)

// Current bucket names, used by the queries.
var (
	bucketSessions    = bucketSessionsV2
	bucketEscalations = bucketEscalationsV1
	bucketAudit       = bucketAuditV1
)

// SchemaVersion is the layout this build reads and writes.
const SchemaVersion = 2

// currentBuckets is the layout of SchemaVersion, created in a new file.
var currentBuckets = [][]byte{bucketMeta, bucketSessionsV2, bucketEscalationsV1, bucketAuditV1}

// migration converts the layout of version From into From+1 inside one
// write transaction; the runner bumps schema_version in that same
// transaction, so a failure leaves the file as it was.
type migration struct {
	From int
	Name string
	Run  func(tx *bolt.Tx) error
}

// migrations is the registry, in order. It is a variable so that tests
// can inject a failing step.
var migrations = []migration{
	{From: 1, Name: "sessions_v1 → sessions_v2 (exit_signal)", Run: migrateSessionsV1toV2},
}

// SchemaError is a database whose layout this build cannot use.
type SchemaError struct {
	Path    string
	Version int
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("state store %s has schema version %d, newer than this lazaret's %d: upgrade lazaret", e.Path, e.Version, SchemaVersion)
}

// MigrationError is a migration that failed; the file is unchanged.
type MigrationError struct {
	Path string
	From int
	Name string
	Err  error
}

func (e *MigrationError) Error() string {
	return fmt.Sprintf("state store %s: migration from schema %d (%s) failed, file left unchanged: %v", e.Path, e.From, e.Name, e.Err)
}
func (e *MigrationError) Unwrap() error { return e.Err }

func schemaVersion(tx *bolt.Tx) (int, bool, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, false, nil
	}
	v := meta.Get(keySchemaVersion)
	if v == nil {
		return 0, false, errors.New("meta bucket without schema_version")
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 {
		return 0, false, fmt.Errorf("schema_version %q is not a version", v)
	}
	return n, true, nil
}

func putSchemaVersion(tx *bolt.Tx, v int) error {
	return tx.Bucket(bucketMeta).Put(keySchemaVersion, []byte(strconv.Itoa(v)))
}

// prepare brings the file to SchemaVersion: a new file gets the current
// layout; an older one runs each pending migration in its own transaction.
// The first read only looks, so an up-to-date file is not written.
func prepare(db *bolt.DB, path string) error {
	var version int
	var exists bool
	if err := db.View(func(tx *bolt.Tx) error {
		var err error
		version, exists, err = schemaVersion(tx)
		return err
	}); err != nil {
		return &CorruptError{Path: path, Cause: err}
	}
	if !exists {
		return db.Update(func(tx *bolt.Tx) error {
			for _, b := range currentBuckets {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return putSchemaVersion(tx, SchemaVersion)
		})
	}
	if version > SchemaVersion {
		return &SchemaError{Path: path, Version: version}
	}
	for _, m := range migrations {
		if m.From < version {
			continue
		}
		if m.From != version {
			return &MigrationError{Path: path, From: version, Name: "none", Err: fmt.Errorf("no migration from schema %d", version)}
		}
		err := db.Update(func(tx *bolt.Tx) error {
			if err := m.Run(tx); err != nil {
				return err
			}
			return putSchemaVersion(tx, m.From+1)
		})
		if err != nil {
			return &MigrationError{Path: path, From: m.From, Name: m.Name, Err: err}
		}
		version = m.From + 1
	}
	if version != SchemaVersion {
		return &MigrationError{Path: path, From: version, Name: "none", Err: fmt.Errorf("no migration from schema %d", version)}
	}
	return nil
}

// sessionV1 is the value format of sessions_v1, frozen: it only ever
// needs to be read, by the migration.
type sessionV1 struct {
	ID      string    `json:"id"`
	Profile string    `json:"profile"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Exit    int       `json:"exit"`
}

// migrateSessionsV1toV2 copies every session into sessions_v2, deriving
// exit_signal from the shell's 128+n convention that lazaret used for the
// exit code of a command killed by a signal, and drops sessions_v1.
func migrateSessionsV1toV2(tx *bolt.Tx) error {
	old := tx.Bucket(bucketSessionsV1)
	if old == nil {
		return errors.New("sessions_v1 bucket missing")
	}
	nb, err := tx.CreateBucket(bucketSessionsV2)
	if err != nil {
		return fmt.Errorf("create sessions_v2: %w", err)
	}
	err = old.ForEach(func(k, v []byte) error {
		var s1 sessionV1
		if err := json.Unmarshal(v, &s1); err != nil {
			return fmt.Errorf("sessions_v1 %q: %w", k, err)
		}
		s2 := Session{
			ID: s1.ID, Profile: s1.Profile, Start: s1.Start, End: s1.End,
			Exit: s1.Exit, ExitSignal: signalFromExit(s1.Exit),
		}
		b, err := json.Marshal(s2)
		if err != nil {
			return err
		}
		return nb.Put(k, b)
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket(bucketSessionsV1)
}
