package statecmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/overlayfs"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

// ErrProfileRunning is returned by FoldLayer and DropLayer while a sandbox
// of the profile runs: the pending layers may be lower dirs of its mounts,
// and the profile's layer is.
var ErrProfileRunning = errors.New("a sandbox of the profile runs")

// LayerState is a sandbox layer of a shared State Anchor that is not the
// profile's own, for `lazaret state`.
type LayerState struct {
	statestore.Layer
	// FastForward: it folds into the profile's layer by itself once no
	// sandbox of the profile runs (its parent is the head, or a layer
	// that will fold before it). A pending layer without it waits for
	// `lazaret state fold` or `lazaret state drop`.
	FastForward bool `json:"fast_forward"`
}

// Layers lists the sandbox layers of a shared Store (none otherwise),
// with the profile layer's history.
func Layers(st statestore.Store) ([]LayerState, statestore.Head, error) {
	if !st.Shared {
		return nil, statestore.Head{}, nil
	}
	head, err := statestore.ReadHead(st.Root)
	if err != nil {
		return nil, head, err
	}
	ls, err := statestore.ReadLayers(st.Root)
	if err != nil {
		return nil, head, err
	}
	ff := map[string]bool{}
	for _, l := range statestore.Chain(head, ls) {
		ff[l.ID] = true
	}
	var out []LayerState
	for _, l := range ls {
		if l.State == "" {
			continue
		}
		out = append(out, LayerState{Layer: l, FastForward: ff[l.ID]})
	}
	return out, head, nil
}

// FoldLayer folds the pending layer id into the profile's layer, whatever
// it was begun on: the user's decision (its entries replace the
// profile's). Only while no sandbox of the profile runs.
func FoldLayer(ctx context.Context, pc *podman.Client, st statestore.Store, id string) error {
	ex, l, err := pendingLayer(st, id)
	if err != nil {
		return err
	}
	defer ex.Close()
	head, err := statestore.ReadHead(st.Root)
	if err != nil {
		return err
	}
	l.State = statestore.LayerFolding
	if err := statestore.WriteLayer(st.Root, l, false); err != nil {
		return err
	}
	if err := statestore.FoldLayer(ctx, pc, st.Root, l); err != nil {
		return err
	}
	head = statestore.Head{Generation: head.Generation + 1, Head: l.ID, FoldedAt: time.Now().UTC(), FoldedFrom: l.Workspace}
	if err := statestore.WriteHead(st.Root, head); err != nil {
		return err
	}
	return removeLayer(ctx, pc, st, id)
}

// DropLayer discards the pending layer id. Only while no sandbox of the
// profile runs (a later sandbox may stack it).
func DropLayer(ctx context.Context, pc *podman.Client, st statestore.Store, id string) error {
	ex, _, err := pendingLayer(st, id)
	if err != nil {
		return err
	}
	defer ex.Close()
	return removeLayer(ctx, pc, st, id)
}

func removeLayer(ctx context.Context, pc *podman.Client, st statestore.Store, id string) error {
	if err := overlayfs.New(pc).RemoveAll(ctx, statestore.LayerDir(st.Root, id)); err != nil {
		return fmt.Errorf("removing layer %s: %w", id, err)
	}
	return nil
}

// pendingLayer takes the profile's lock exclusively and returns layer id,
// which must be pending.
func pendingLayer(st statestore.Store, id string) (*statestore.ProfileLock, statestore.Layer, error) {
	if !st.Shared {
		return nil, statestore.Layer{}, errors.New("this workspace's State Anchor is not the profile's: it has no layers")
	}
	ex, err := statestore.TryExclusive(st.Root)
	if err != nil {
		return nil, statestore.Layer{}, err
	}
	if ex == nil {
		return nil, statestore.Layer{}, ErrProfileRunning
	}
	ls, err := statestore.ReadLayers(st.Root)
	if err != nil {
		ex.Close()
		return nil, statestore.Layer{}, err
	}
	for _, l := range ls {
		if l.ID == id && (l.State == statestore.LayerPending || l.State == statestore.LayerFolding) {
			return ex, l, nil
		}
	}
	ex.Close()
	return nil, statestore.Layer{}, fmt.Errorf("no pending layer %q (`lazaret state` lists them)", id)
}
