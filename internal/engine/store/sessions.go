package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// Session is one completed Client Session (value format of sessions_v2).
type Session struct {
	ID      string    `json:"id"`
	Profile string    `json:"profile"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	// Exit is the exit code lazaret returned for the session's command,
	// ExitNotReported when the recorder did not learn it.
	Exit int `json:"exit"`
	// ExitSignal names the signal that killed the command ("SIGKILL"),
	// empty when it exited. Added in schema 2.
	ExitSignal string `json:"exit_signal,omitempty"`
}

// ExitNotReported is Session.Exit when the exit code is unknown (the
// coordinator records a session when it detaches; the exit code is the
// CLI's).
const ExitNotReported = -1

// signalFromExit maps the shell convention 128+n back to signal n's name.
func signalFromExit(code int) string {
	if code <= 128 || code > 128+64 {
		return ""
	}
	return unix.SignalName(syscall.Signal(code - 128))
}

// RecordSession stores (or replaces) a completed session, keyed by its id.
func (s *Store) RecordSession(ctx context.Context, sess Session) error {
	if sess.ID == "" {
		return errors.New("record session: empty id")
	}
	sess.Start, sess.End = sess.Start.UTC().Round(0), sess.End.UTC().Round(0)
	v, err := json.Marshal(sess)
	if err != nil {
		return fmt.Errorf("record session %s: %w", sess.ID, err)
	}
	return s.write(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSessions).Put([]byte(sess.ID), v)
	})
}

// Sessions returns the recorded sessions, most recent start last; limit > 0
// keeps only the last limit of them.
func (s *Store) Sessions(ctx context.Context, limit int) ([]Session, error) {
	var out []Session
	err := s.read(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		return tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
			var sess Session
			if err := json.Unmarshal(v, &sess); err != nil {
				return fmt.Errorf("session %q: %w", k, err)
			}
			out = append(out, sess)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}
