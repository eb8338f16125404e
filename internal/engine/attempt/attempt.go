// Package attempt keeps the records of parallel attempts (`lazaret
// fork`): each attempt is a Domain Anchor of its own beside its parent's
// (domain.Anchor.ForAttempt), and its Domain Root holds attempt.json, the
// record of where it came from. The record is written last by a fork, so
// an attempt exists exactly when its record does.
package attempt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/lazaret-dev/lazaret/internal/atomicfile"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// Record is an attempt's attempt.json.
type Record struct {
	Name      string `json:"name"`
	Profile   string `json:"profile"`
	Workspace string `json:"workspace"`
	Hash      string `json:"hash"`
	// Parent is the Domain Anchor the attempt was forked from.
	Parent  string    `json:"parent"`
	Created time.Time `json:"created"`
	// Base is the commit its agent branch began at ("" in direct mode or
	// outside git).
	Base string `json:"base,omitempty"`
	// Running: the parent ran when it was forked (its state copied
	// paused, its refs synced first).
	Running bool `json:"running,omitempty"`
	// State is how the persistent dirs were copied: "reflink", "copy",
	// or "" when the profile persists none.
	State string `json:"state,omitempty"`
	// StateBytes is what the copy holds (apparent size).
	StateBytes int64 `json:"state_bytes,omitempty"`
	// Layers are the parent's sandbox layers the copy took on top of the
	// profile's layer (`attempts keep` drops them with the profile's
	// layer it replaces).
	Layers []string `json:"layers,omitempty"`
	// Backend is where the attempt runs: "" for the local backend,
	// BackendKubernetes for a cluster attempt (a claim of its own, its
	// persistent dirs on a PVC of its own, not under its Domain Root).
	// The branches are on the host either way; each backend's sandbox
	// verbs (exec, rm, keep) take only their own attempts.
	Backend string `json:"backend,omitempty"`
}

// BackendKubernetes is Record.Backend of an attempt lazaret-kube made.
const BackendKubernetes = "kubernetes"

// maxRecord bounds attempt.json.
const maxRecord = 64 << 10

// ErrNotFound is returned for an attempt that has no record.
var ErrNotFound = errors.New("no such attempt")

// NotFoundError names the attempt that is missing.
type NotFoundError struct {
	Name, Profile, Workspace string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no attempt %q of profile %s in %s", e.Name, e.Profile, e.Workspace)
}

func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// Write writes a's record (a must be an attempt's Anchor), creating its
// Domain Root if needed.
func Write(a *domain.Anchor, r Record) error {
	if a.Attempt == "" || r.Name != a.Attempt || r.Hash != a.Hash {
		return fmt.Errorf("attempt record %q for domain %s (%q): mismatch", r.Name, a.Hash, a.Attempt)
	}
	if err := os.MkdirAll(a.Root(), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(a.AttemptRecord(), append(b, '\n'), 0o600)
}

// Read reads the record of attempt Anchor a.
func Read(a *domain.Anchor) (Record, error) {
	r, err := readFile(a.AttemptRecord())
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, &NotFoundError{Name: a.Attempt, Profile: a.Profile, Workspace: a.Workspace}
	}
	if err != nil {
		return Record{}, err
	}
	if r.Name != a.Attempt || r.Hash != a.Hash || r.Profile != a.Profile || r.Workspace != a.Workspace {
		return Record{}, fmt.Errorf("%s: the record names attempt %q of %s in %s, not this domain's", a.AttemptRecord(), r.Name, r.Profile, r.Workspace)
	}
	return r, nil
}

func readFile(name string) (Record, error) {
	f, err := os.Open(name)
	if err != nil {
		return Record{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return Record{}, err
	}
	if len(b) > maxRecord {
		return Record{}, fmt.Errorf("%s: larger than %d bytes", name, maxRecord)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// Open returns the Anchor of attempt name of parent (the workspace's own
// Anchor), which must exist.
func Open(parent *domain.Anchor, name string) (*domain.Anchor, error) {
	a, err := parent.ForAttempt(name)
	if err != nil {
		return nil, err
	}
	if _, err := Read(a); err != nil {
		return nil, err
	}
	return a, nil
}

// List returns the attempts of parent's profile and workspace, by name
// (an attempt forked from another is its workspace's too).
func List(parent *domain.Anchor) ([]Record, error) {
	es, err := os.ReadDir(parent.DomainsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, e := range es {
		if !e.IsDir() {
			continue
		}
		r, err := readFile(filepath.Join(parent.DomainsDir(), e.Name(), "attempt.json"))
		if err != nil {
			continue // not an attempt (or not one lazaret finished making)
		}
		if r.Profile != parent.Profile || r.Workspace != parent.Workspace || e.Name() != r.Hash ||
			domain.AttemptHash(r.Profile, r.Workspace, r.Name) != r.Hash {
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Names returns the names `lazaret fork NAME -n N` makes: NAME alone for
// N = 1, else NAME-1 … NAME-N; each must be a valid attempt name.
func Names(name string, n int) ([]string, error) {
	if n < 1 {
		return nil, fmt.Errorf("-n %d: want at least 1 attempt", n)
	}
	if n == 1 {
		return []string{name}, domain.ValidAttemptName(name)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = name + "-" + strconv.Itoa(i+1)
		if err := domain.ValidAttemptName(out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
