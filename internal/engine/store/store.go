// Package store is the state store of one Domain Anchor: a bbolt file
// (<domain_root>/state.db) with versioned buckets, hand-written
// migrations, and the hash-chained audit trail. It is the only package
// that imports bbolt.
//
// Every transaction runs on one goroutine per Store (the worker) fed by a
// bounded queue, so a slow disk delays only callers that wait for their
// result and never a caller that gives up (context) or a full queue
// (EnqueueTimeout). The file is locked with bbolt's flock for as long as
// the Store is open; a second opener fails after Options.Timeout with an
// *InUseError naming the holder.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Options tune Open. The zero value is usable.
type Options struct {
	// Timeout bounds the wait for the file lock (default 2 s; a context
	// deadline that comes sooner wins).
	Timeout time.Duration
	// Role names the opener in the owner record, shown to a second
	// opener: "coordinator" (the default) or e.g. "lazaret audit".
	Role string
	// QueueSize is the worker's queue length (default 256).
	QueueSize int
	// EnqueueTimeout bounds the wait for room in a full queue when the
	// caller's context has no earlier deadline (default 5 s).
	EnqueueTimeout time.Duration
	// NoSync skips fsync on commit. Only for tests and benchmarks that
	// measure something else: a crash can then lose committed entries.
	NoSync bool
	// Log receives warnings (a corrupt file moved aside). Default: discard.
	Log *slog.Logger
	// Now is the clock for entries without a time (tests).
	Now func() time.Time
	// OpenBudget bounds the whole open (lock, checks, migrations) when
	// the context has no earlier deadline (default 30 s). bbolt can spin
	// forever on some damaged files; Open then fails with
	// ErrOpenStalled instead of hanging.
	OpenBudget time.Duration
	// Check runs bbolt's full consistency check at open (it reads every
	// page: about a second per 100 MB here). The coordinator sets it, so a
	// damaged file is moved aside before anything writes to it: bbolt
	// can loop forever committing into a damaged free list. A migration
	// always checks first.
	Check bool
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Role == "" {
		o.Role = "coordinator"
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 256
	}
	if o.EnqueueTimeout <= 0 {
		o.EnqueueTimeout = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OpenBudget <= 0 {
		o.OpenBudget = 30 * time.Second
	}
}

// Errors of the worker.
var (
	// ErrClosed is returned by calls on a closed Store.
	ErrClosed = errors.New("state store closed")
	// ErrBusy is returned when the worker's queue stayed full for
	// EnqueueTimeout.
	ErrBusy = errors.New("state store busy: request queue full")
	// ErrOpenStalled is returned when opening did not finish within the
	// context's deadline or OpenBudget: bbolt is stuck in a damaged file.
	ErrOpenStalled = errors.New("opening did not finish; the file is probably damaged: move it aside to start a new store (the old one is then kept for inspection)")
)

// CorruptError describes a file that bbolt could not use.
type CorruptError struct {
	Path string
	// MovedTo is where the file was moved aside; empty if it was not.
	MovedTo string
	Cause   error
	// locked is set when this process still holds the flock through a
	// mapping bbolt leaked when it panicked.
	locked bool
}

func (e *CorruptError) Error() string {
	if e.MovedTo != "" {
		return fmt.Sprintf("state store %s was corrupt (%v); moved aside to %s and a new one created", e.Path, e.Cause, e.MovedTo)
	}
	return fmt.Sprintf("state store %s is corrupt: %v", e.Path, e.Cause)
}
func (e *CorruptError) Unwrap() error { return e.Cause }

// Store is an open state store.
type Store struct {
	path      string
	opts      Options
	db        *bolt.DB
	recovered *CorruptError

	mu     sync.RWMutex // guards closed against sends on q
	closed bool
	q      chan *op
	done   chan struct{} // closed when the worker has closed the file
	cerr   error         // close error, set before done is closed
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Recovered reports a corrupt file found at Open and moved aside (nil if
// none), so the caller can tell the user where the old file went.
func (s *Store) Recovered() *CorruptError { return s.recovered }

// Open opens (creating if needed) the state store at path, migrates it to
// SchemaVersion, and starts its worker. A corrupt file is moved aside to
// <path>.corrupt-<timestamp> and a new one created (see Recovered); a
// file that is merely newer than this build, or whose migration fails, is
// left untouched and reported.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	opts.defaults()
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < opts.Timeout {
			opts.Timeout = max(left, time.Millisecond)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("state store %s: %w", path, err)
	}
	s := &Store{path: path, opts: opts, q: make(chan *op, opts.QueueSize), done: make(chan struct{})}
	ready := make(chan error, 1)
	// The open runs on the worker goroutine too: it sets SetPanicOnFault,
	// which is per goroutine, so a fault in the mmap of a damaged file
	// becomes a recoverable panic instead of killing the process.
	go s.run(ready)
	budget := time.NewTimer(opts.Timeout + opts.OpenBudget)
	defer budget.Stop()
	select {
	case err := <-ready:
		if err != nil {
			return nil, err
		}
		return s, nil
	case <-ctx.Done():
		return nil, s.abandon(ready, fmt.Errorf("%w (%w)", ErrOpenStalled, ctx.Err()))
	case <-budget.C:
		return nil, s.abandon(ready, ErrOpenStalled)
	}
}

// abandon gives up waiting for an open that bbolt is stuck in. The stuck
// goroutine cannot be stopped (it keeps the lock until the process
// exits); should it ever finish, the store is closed again.
func (s *Store) abandon(ready <-chan error, cause error) error {
	go func() {
		if err := <-ready; err == nil {
			s.Close()
		}
	}()
	return fmt.Errorf("state store %s: %w", s.path, cause)
}

// openFile opens the file, handles a corrupt one, writes the owner record
// and migrates. It runs on the worker goroutine.
func (s *Store) openFile() error {
	db, err := s.boltOpen()
	if err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return err
		}
		if err := s.quarantine(ce); err != nil {
			return err
		}
		if db, err = s.boltOpen(); err != nil {
			return err
		}
	}
	if err := writeOwner(s.path, s.opts.Role); err != nil {
		db.Close()
		return fmt.Errorf("state store %s: %w", s.path, err)
	}
	if err = guard(func() error { return check(db, s.opts.Check) }); err != nil {
		err = &CorruptError{Path: s.path, Cause: err}
	} else {
		err = guard(func() error { return prepare(db, s.path) })
		if errors.Is(err, errPanic) {
			// bbolt met a damaged page while migrating; the
			// transaction was rolled back.
			err = &CorruptError{Path: s.path, Cause: err}
		}
	}
	var ce *CorruptError
	if errors.As(err, &ce) && s.recovered == nil {
		// The header was fine but the content is not: move it aside
		// too, under the lock we still hold.
		db.Close()
		if qerr := s.quarantine(ce); qerr != nil {
			removeOwner(s.path)
			return qerr
		}
		if db, err = s.boltOpen(); err == nil {
			err = writeOwner(s.path, s.opts.Role)
		}
		if err == nil {
			err = guard(func() error { return prepare(db, s.path) })
		}
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		removeOwner(s.path)
		return err
	}
	s.db = db
	return nil
}

// boltOpen opens the file with bbolt, turning a lock timeout into an
// *InUseError and a file bbolt rejects into a *CorruptError.
func (s *Store) boltOpen() (db *bolt.DB, err error) {
	// bbolt does not close its file when it panics on a damaged page,
	// and that file holds the flock: keep it to close it ourselves.
	var f *os.File
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		var err error
		f, err = os.OpenFile(name, flag, perm)
		return f, err
	}
	err = guard(func() error {
		var oerr error
		db, oerr = bolt.Open(s.path, 0o600, &bolt.Options{Timeout: s.opts.Timeout, NoSync: s.opts.NoSync, OpenFile: openFile})
		return oerr
	})
	if errors.Is(err, errPanic) && f != nil {
		// bbolt's mmap of the file keeps its open file description,
		// and so the flock, alive after the panic: this process holds
		// the lock until it exits (the mapping is leaked; it is
		// address space, not memory). quarantine knows it.
		f.Close()
		return nil, &CorruptError{Path: s.path, Cause: err, locked: true}
	}
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, inUse(s.path)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, errPanic):
		return nil, &CorruptError{Path: s.path, Cause: err}
	}
	if fi, serr := os.Stat(s.path); serr == nil && fi.Mode().IsRegular() && fi.Size() > 0 && fi.Size() < 2*int64(os.Getpagesize()) {
		// Too short to hold bbolt's two meta pages.
		return nil, &CorruptError{Path: s.path, Cause: err}
	}
	return nil, fmt.Errorf("state store %s: %w", s.path, err)
}

// check reads what every later call relies on, so a file whose pages are
// damaged is found at open, when it can still be moved aside. With full,
// or when a migration is about to write into an older file, it also runs
// bbolt's consistency check of every page.
func check(db *bolt.DB, full bool) error {
	return db.View(func(tx *bolt.Tx) error {
		version, exists, err := schemaVersion(tx)
		if err != nil {
			return err
		}
		err = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			c := b.Cursor()
			c.First()
			c.Last()
			return nil
		})
		if err != nil || !(full || exists && version < SchemaVersion) {
			return err
		}
		var errs []error
		for err := range tx.Check() {
			if len(errs) < 3 {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("consistency check: %w", errors.Join(errs...))
		}
		return nil
	})
}

// errPanic marks a panic recovered from bbolt (a damaged file).
var errPanic = errors.New("bbolt panicked")

// guard runs fn, turning a panic (bbolt on a damaged page, or a memory
// fault with SetPanicOnFault) into an error wrapping errPanic.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	return fn()
}

// quarantine moves a corrupt file aside under an exclusive flock of its
// own, so two processes finding the same corrupt file move it once.
func (s *Store) quarantine(ce *CorruptError) error {
	dst, err := moveAside(s.path, s.opts.Timeout, ce.locked)
	if err != nil {
		return fmt.Errorf("state store %s is corrupt (%v) and could not be moved aside: %w", s.path, ce.Cause, err)
	}
	if dst == "" {
		return nil // someone else moved it; open the new file
	}
	ce.MovedTo = dst
	s.recovered = ce
	s.opts.Log.Warn("state store was corrupt; moved aside and a new one created", "path", s.path, "moved_to", dst, "cause", ce.Cause)
	return nil
}

// Close stops accepting calls, lets the worker finish every queued call,
// closes the file (releasing the lock) and removes the owner record.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.q)
	}
	s.mu.Unlock()
	t := time.NewTimer(closeBudget)
	defer t.Stop()
	select {
	case <-s.done:
		return s.cerr
	case <-t.C:
		// A transaction is stuck in a damaged file (see ErrOpenStalled);
		// the lock is released when the process exits.
		return fmt.Errorf("state store %s: close did not finish: a transaction is stuck (damaged file?)", s.path)
	}
}

// closeBudget bounds Close's wait for the queued calls and the file close.
const closeBudget = 30 * time.Second
