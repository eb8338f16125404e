package statestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// Files of a Keep: its intent beside the parent's root (SideFile), and the
// token that marks the attempt's overlay dirs once staged in the parent's
// root.
const (
	keepFile      = "keep.json"
	keepTokenFile = "keep.token"
)

// keepIntent is a Keep in progress: all a re-run needs to finish it as it
// was begun.
type keepIntent struct {
	Attempt string    `json:"attempt"` // the attempt's root
	Token   string    `json:"token"`
	Shared  bool      `json:"shared"`
	Dirs    []keptDir `json:"dirs"`
	Drop    []string  `json:"drop,omitempty"`
	Head    Head      `json:"head,omitzero"` // the head it writes (shared)
}

type keptDir struct {
	Name string `json:"name"` // overlay name
	Done bool   `json:"done,omitempty"`
}

// Keep replaces the profile's layer (or, for a non-shared parent store,
// the parent's own changes) of each dir with the attempt's changes: each
// dir's overlay dir (changes and record) of the attempt takes the place of
// the parent's, whose old one is removed. A dir the attempt has no changes
// of is left as the parent has it. On a shared store the head gets the
// next generation and a new ID, so the pending layers begun on the old
// layer are no longer fast-forwards and stay for the user (`lazaret
// state`); the layers in drop (folded into the attempt's copy by Fork)
// are deleted. The attempt's store is left without those dirs.
//
// The attempt's overlay dir is renamed into the parent's root (the user's
// own dir, so it may change parent), or copied when the two roots are on
// different file systems. The caller holds the profile's lock exclusively
// (TryExclusive: no sandbox of the profile has anything mounted) and the
// parent's and the attempt's domain locks; neither sandbox runs.
//
// Crashes: an intent (keep.json beside the parent's root) is written
// first. Then every dir is staged in the parent's root as .keep-<N>,
// marked with the intent's token; then the head is bumped; then each
// staged dir is exchanged with the parent's (renameat2 RENAME_EXCHANGE,
// atomic: the parent's dir is never missing) and the old one, now
// .keep-<N>, removed (with the attempt's, when it was copied); then the
// dropped layers; then the intent. Wherever a crash stops it, the old and
// the new layer are each whole in a known place (the token tells which is
// which), and the next Keep (of any attempt: the one cut short is finished
// first, and is all a repeated call does) or ResumeKeep finishes the job;
// a start of the parent's sandbox should call ResumeKeep first. An error
// while staging (no space for a copy) puts everything back and drops the
// intent.
func Keep(ctx context.Context, pc *podman.Client, attempt Store, parent Store, dirs []string, drop []string) error {
	return keep(ctx, nsOps(pc), attempt, parent, dirs, drop)
}

// ResumeKeep finishes a Keep into parent that a crash cut short; nothing
// when there is none. Under the same locks as Keep, before anything mounts
// the parent's layers.
func ResumeKeep(ctx context.Context, pc *podman.Client, parent Store) error {
	in, ok, err := readKeep(parent.Root)
	if err != nil || !ok {
		return err
	}
	return finishKeep(ctx, nsOps(pc), parent.Root, in)
}

func keep(ctx context.Context, ops fileOps, attempt, parent Store, dirs, drop []string) error {
	if err := ValidateDirs(dirs); err != nil {
		return err
	}
	if attempt.Shared || filepath.Dir(attempt.Root) == filepath.Dir(parent.Root) {
		return fmt.Errorf("keep: %s is no attempt's own State Anchor beside %s", attempt.Root, parent.Root)
	}
	if err := CheckClosed(parent.DataRoot, parent.Root); err != nil {
		return err
	}
	if err := vault.Seal(parent.Root); err != nil {
		return err
	}
	prev, ok, err := readKeep(parent.Root)
	if err != nil {
		return err
	}
	if ok {
		if err := finishKeep(ctx, ops, parent.Root, prev); err != nil {
			return fmt.Errorf("finishing the keep cut short: %w", err)
		}
		if prev.Attempt == attempt.Root {
			return nil // this very keep: its dirs are no longer in the attempt
		}
	}
	in, err := newKeep(attempt, parent, dirs, drop)
	if err != nil || len(in.Dirs) == 0 {
		return err
	}
	if err := WriteJSON(SideFile(parent.Root, keepFile), in); err != nil {
		return err
	}
	return finishKeep(ctx, ops, parent.Root, in)
}

func newKeep(attempt, parent Store, dirs, drop []string) (keepIntent, error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return keepIntent{}, err
	}
	in := keepIntent{Attempt: attempt.Root, Token: hex.EncodeToString(tok), Shared: parent.Shared, Drop: drop}
	for _, dir := range dirs {
		if attempt.HasChanges(dir) {
			in.Dirs = append(in.Dirs, keptDir{Name: domain.OverlayName(dir)})
		}
	}
	if parent.Shared {
		h, err := ReadHead(parent.Root)
		if err != nil {
			return in, err
		}
		// Named after the attempt's domain, whose changes the layer now is.
		in.Head = Head{Generation: h.Generation + 1, Head: NewLayerID(filepath.Base(filepath.Dir(attempt.Root))), FoldedAt: time.Now().UTC()}
	}
	return in, nil
}

func readKeep(root string) (keepIntent, bool, error) {
	var in keepIntent
	ok, err := ReadJSON(SideFile(root, keepFile), &in)
	return in, ok, err
}

// finishKeep carries out in from wherever it stands.
func finishKeep(ctx context.Context, ops fileOps, root string, in keepIntent) error {
	if err := stageAll(ctx, ops, root, in); err != nil {
		if begun, cerr := swapBegun(root, in); cerr != nil || begun {
			return err // past the point of no return: a re-run finishes
		}
		if uerr := unstageAll(ctx, ops, root, in); uerr != nil {
			return fmt.Errorf("%w (and putting the attempt's dirs back: %v)", err, uerr)
		}
		return err
	}
	if in.Shared {
		// Before the layer changes under them: the pending layers begun
		// on the old one are fast-forwards no more.
		h, err := ReadHead(root)
		if err != nil {
			return err
		}
		if h.Generation < in.Head.Generation {
			if err := WriteHead(root, in.Head); err != nil {
				return err
			}
		}
	}
	intent := SideFile(root, keepFile)
	for i, d := range in.Dirs {
		if d.Done {
			continue
		}
		if err := swapIn(ctx, ops, root, in.Attempt, d.Name, in.Token); err != nil {
			return fmt.Errorf("keep: %s: %w", d.Name, err)
		}
		in.Dirs[i].Done = true
		if err := WriteJSON(intent, in); err != nil {
			return err
		}
		removeToken(root, d.Name)
	}
	if in.Shared {
		if err := dropLayers(ctx, ops, root, in.Drop); err != nil {
			return err
		}
	}
	return os.Remove(intent)
}

// stageAll puts each dir of the attempt not yet kept in the parent's root
// as .keep-<N>, marked with the token.
func stageAll(ctx context.Context, ops fileOps, root string, in keepIntent) error {
	for _, d := range in.Dirs {
		if d.Done {
			continue
		}
		swapped, err := hasToken(root, d.Name, in.Token)
		if err != nil {
			return err
		}
		if swapped {
			continue
		}
		if err := stage(ctx, ops, root, in.Attempt, d.Name, in.Token); err != nil {
			return fmt.Errorf("keep: %s: %w", d.Name, err)
		}
	}
	return nil
}

func stage(ctx context.Context, ops fileOps, root, attempt, name, token string) error {
	staged := ".keep-" + name
	switch {
	case exists(root, staged):
		// Staged before a crash (a copy's source stays until the swap).
	case exists(attempt, name):
		if err := moveIn(ctx, ops, root, attempt, name, staged); err != nil {
			return err
		}
	default:
		return fmt.Errorf("the attempt's %s is in neither %s nor %s", name, attempt, root)
	}
	// A start makes its own work and merged dirs.
	sp := filepath.Join(root, staged)
	if err := ops.removeAll(ctx, filepath.Join(sp, name+"_work"), filepath.Join(sp, name+"_merged"), filepath.Join(sp, "mount.log")); err != nil {
		return err
	}
	sd, err := vault.Open(root, staged, false, 0)
	if err != nil {
		return err
	}
	defer sd.Close()
	// Synced before any exchange: after a crash the token must tell the
	// new dir from the old.
	return WriteJSON(sd.Join(keepTokenFile), token)
}

// moveIn renames the attempt's overlay dir of name into root as staged,
// or copies it there when the two are on different file systems.
func moveIn(ctx context.Context, ops fileOps, root, attempt, name, staged string) error {
	err := vault.With(attempt, 0o300, func() error {
		return vault.Rename(root, filepath.Join(attempt, name), staged)
	})
	if !errors.Is(err, unix.EXDEV) {
		return err
	}
	tmp := ".keep-copy-" + name
	if err := ops.removeAll(ctx, filepath.Join(root, tmp)); err != nil {
		return err
	}
	td, err := vault.Open(root, tmp, true, 0o755)
	if err != nil {
		return err
	}
	defer td.Close()
	changes := name + "_changes"
	if _, err := ops.copy(ctx, filepath.Join(attempt, name, changes), filepath.Join(root, tmp, changes)); err != nil {
		return err
	}
	ad, err := vault.Open(attempt, name, false, 0)
	if err != nil {
		return err
	}
	rec, err := ReadRecord(ad.Path())
	ad.Close()
	if err != nil {
		return err
	}
	if rec != nil {
		if err := WriteJSON(td.Join(RecordFile), *rec); err != nil {
			return err
		}
	}
	// Staged only once whole; the source goes after the swap, so that a
	// failure before it can drop the copy and lose nothing.
	return vault.Rename(root, filepath.Join(root, tmp), staged)
}

// swapBegun reports whether in went past staging (a resumed keep whose
// staging fails): the head bumped, or a dir swapped.
func swapBegun(root string, in keepIntent) (bool, error) {
	if in.Shared {
		h, err := ReadHead(root)
		if err != nil || h.Generation >= in.Head.Generation {
			return true, err
		}
	}
	for _, d := range in.Dirs {
		swapped, err := hasToken(root, d.Name, in.Token)
		if d.Done || swapped || err != nil {
			return true, err
		}
	}
	return false, nil
}

// unstageAll puts back what stageAll did, when it failed before any swap
// (swapBegun): the parent stays as it was and the intent goes.
func unstageAll(ctx context.Context, ops fileOps, root string, in keepIntent) error {
	for _, d := range in.Dirs {
		staged := ".keep-" + d.Name
		if err := ops.removeAll(ctx, filepath.Join(root, ".keep-copy-"+d.Name)); err != nil {
			return err
		}
		switch {
		case !exists(root, staged):
		case exists(in.Attempt, d.Name): // a copy: the source is whole
			if err := ops.removeAll(ctx, filepath.Join(root, staged)); err != nil {
				return err
			}
		default:
			if err := vault.With(root, 0o300, func() error {
				return vault.Rename(in.Attempt, filepath.Join(root, staged), d.Name)
			}); err != nil {
				return err
			}
		}
	}
	return os.Remove(SideFile(root, keepFile))
}

// swapIn exchanges the staged dir with the parent's of name and removes
// the old one, and the attempt's when it was copied. Done already when
// the parent's dir has the token.
func swapIn(ctx context.Context, ops fileOps, root, attempt, name, token string) error {
	staged, old := ".keep-"+name, ".keep-old-"+name
	swapped, err := hasToken(root, name, token)
	if err != nil {
		return err
	}
	if !swapped {
		err := vault.With(root, 0o300, func() error {
			s, n := filepath.Join(root, staged), filepath.Join(root, name)
			if _, err := os.Lstat(n); errors.Is(err, os.ErrNotExist) {
				return os.Rename(s, n)
			}
			err := unix.Renameat2(unix.AT_FDCWD, s, unix.AT_FDCWD, n, unix.RENAME_EXCHANGE)
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
				// No atomic exchange on this file system: the old one
				// aside, then the new one in; a crash between leaves
				// the new one staged, which a re-run moves in.
				if err := os.Rename(n, filepath.Join(root, old)); err != nil {
					return err
				}
				return os.Rename(s, n)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return ops.removeAll(ctx, filepath.Join(root, staged), filepath.Join(root, old), filepath.Join(attempt, name))
}

// hasToken reports whether root's overlay dir name is the one staged with
// token.
func hasToken(root, name, token string) (bool, error) {
	d, err := vault.Open(root, name, false, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer d.Close()
	var got string
	ok, err := ReadJSON(d.Join(keepTokenFile), &got)
	if err != nil {
		return false, nil // torn: not the synced token
	}
	return ok && got == token, nil
}

func removeToken(root, name string) {
	if d, err := vault.Open(root, name, false, 0); err == nil {
		_ = os.Remove(d.Join(keepTokenFile))
		d.Close()
	}
}

// exists reports whether vault v holds name.
func exists(v, name string) bool {
	d, err := vault.Open(v, name, false, 0)
	if err != nil {
		return false
	}
	d.Close()
	return true
}

// dropLayers removes the pending layers among ids: their changes are in
// the kept layer.
func dropLayers(ctx context.Context, ops fileOps, root string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	layers, err := ReadLayers(root)
	if err != nil {
		return err
	}
	var paths []string
	for _, l := range layers {
		if want[l.ID] && (l.State == LayerPending || l.State == LayerFolding) {
			paths = append(paths, LayerDir(root, l.ID))
		}
	}
	if len(paths) == 0 {
		return nil
	}
	return ops.removeAll(ctx, paths...)
}
