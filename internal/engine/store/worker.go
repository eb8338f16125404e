package store

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// op is one call waiting for the worker.
type op struct {
	ctx   context.Context
	write bool
	fn    func(tx *bolt.Tx) error
	done  chan error // buffered: the worker never blocks on a caller that left
}

// maxBatch bounds how many queued writes share one commit (one fsync).
const maxBatch = 128

// run is the worker: it opens the file, reports on ready, then runs every
// transaction until Close. Consecutive queued writes are committed
// together (group commit), which is what makes fsync-per-commit affordable
// when several sessions write at once.
func (s *Store) run(ready chan<- error) {
	debug.SetPanicOnFault(true)
	if err := s.openFile(); err != nil {
		ready <- err
		close(s.done)
		return
	}
	ready <- nil
	var pending *op // a read taken from the queue while collecting writes
	for {
		o := pending
		pending = nil
		if o == nil {
			var ok bool
			if o, ok = <-s.q; !ok {
				break
			}
		}
		if !o.write {
			s.runRead(o)
			continue
		}
		batch := []*op{o}
	collect:
		for len(batch) < maxBatch {
			select {
			case n, ok := <-s.q:
				if !ok {
					break collect
				}
				if !n.write {
					pending = n
					break collect
				}
				batch = append(batch, n)
			default:
				break collect
			}
		}
		s.runWrites(batch)
	}
	s.cerr = s.db.Close()
	removeOwner(s.path)
	close(s.done)
}

func (s *Store) runRead(o *op) {
	if err := o.ctx.Err(); err != nil {
		o.done <- err
		return
	}
	o.done <- guard(func() error { return s.db.View(o.fn) })
}

// runWrites commits live ops in one transaction. If one op fails, the
// transaction is rolled back, that op gets its error, and the others are
// committed again without it.
func (s *Store) runWrites(batch []*op) {
	live := batch[:0]
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.done <- err
			continue
		}
		live = append(live, o)
	}
	for len(live) > 0 {
		failed := -1
		var failErr error
		err := guard(func() error {
			return s.db.Update(func(tx *bolt.Tx) error {
				for i, o := range live {
					if err := o.fn(tx); err != nil {
						failed, failErr = i, err
						return err
					}
				}
				return nil
			})
		})
		switch {
		case err == nil:
			for _, o := range live {
				o.done <- nil
			}
			return
		case failed >= 0 && errors.Is(err, failErr):
			live[failed].done <- failErr
			live = append(live[:failed:failed], live[failed+1:]...)
		default:
			// The commit itself failed (disk full, I/O error, damage):
			// every op in it failed.
			for _, o := range live {
				o.done <- fmt.Errorf("state store %s: commit: %w", s.path, err)
			}
			return
		}
	}
}

func (s *Store) read(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.submit(ctx, &op{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

func (s *Store) write(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.submit(ctx, &op{ctx: ctx, write: true, fn: fn, done: make(chan error, 1)})
}

// submit queues o and waits for its result. A full queue is waited on
// until the context ends or EnqueueTimeout passes, never forever. A caller
// whose context ends after the op was queued gets the context's error; the
// op may still run (a write may still commit).
func (s *Store) submit(ctx context.Context, o *op) error {
	if err := s.enqueue(ctx, o); err != nil {
		return err
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) enqueue(ctx context.Context, o *op) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.q <- o:
		return nil
	default:
	}
	t := time.NewTimer(s.opts.EnqueueTimeout)
	defer t.Stop()
	select {
	case s.q <- o:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
	case <-t.C:
		return ErrBusy
	}
}
