package stateanchor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// A profile's shared State Anchor is layered (statestore/layers.go): this
// sandbox writes a layer of its own, mounted over the pending layers it
// stacks and the profile's layer, which nobody writes while any sandbox of
// the profile has it mounted. So several sandboxes of one profile run at
// once, and one starts right after another ended without waiting for it.

// shareWait bounds the wait for the profile's lock while somebody holds it
// exclusively: a fold (one rename per changed entry) or a state reset.
const shareWait = 2 * time.Minute

// layering is this sandbox's layer on a shared root.
type layering struct {
	rec    statestore.Layer
	reg    *statestore.Registration
	lowers []string // IDs of the stacked pending layers, newest first
	holder statestore.Holder
}

// joinProfile takes the profile's lock shared, first folding what can be
// folded when no sandbox of the profile runs, and sets up this sandbox's
// layer over the profile's layer and the pending chain.
func (c *Component) joinProfile(ctx context.Context) error {
	ex, err := statestore.TryExclusive(c.root)
	if err != nil {
		return err
	}
	if ex != nil {
		err := c.maintain(ctx)
		ex.Close()
		if err != nil {
			return err
		}
	}
	if c.lock, err = statestore.ShareProfile(c.root, shareWait); err != nil {
		return err
	}
	// Holders that crashed while others ran: their layers become pending
	// (when their containers are gone) before the chain is read.
	if _, err := c.reapDead(ctx); err != nil {
		return err
	}
	head, err := statestore.ReadHead(c.root)
	if err != nil {
		return err
	}
	layers, err := statestore.ReadLayers(c.root)
	if err != nil {
		return err
	}
	chain := statestore.Chain(head, layers)
	a := c.opt.Anchor
	rec := statestore.Layer{ID: statestore.NewLayerID(a.Hash), Domain: a.Hash, Workspace: a.Workspace,
		Container: a.Container(), Parent: head.Head, Generation: head.Generation, State: statestore.LayerActive,
		Dirs: c.opt.Dirs, Started: time.Now().UTC()}
	lay := &layering{rec: rec}
	for i := len(chain) - 1; i >= 0; i-- {
		lay.lowers = append(lay.lowers, chain[i].ID)
	}
	if len(chain) > 0 {
		lay.rec.Parent = chain[len(chain)-1].ID
		c.log.Info("stacking pending layers of the profile's ended sandboxes", "count", len(chain))
	}
	lay.holder = statestore.Holder{Layer: rec.ID, Domain: a.Hash, Workspace: a.Workspace, Container: a.Container(), PID: os.Getpid()}
	if lay.reg, err = statestore.Register(c.root, lay.holder); err != nil {
		return err
	}
	c.lay = lay
	return statestore.WriteLayer(c.root, lay.rec, true)
}

// maintain runs under the profile's exclusive lock (no sandbox of the
// profile has anything mounted, but maybe a crashed coordinator's
// container): it removes what crashed holders left and folds the pending
// chain into the profile's layer.
func (c *Component) maintain(ctx context.Context) error {
	if err := c.checkOldOwner(ctx); err != nil {
		return err
	}
	kept, err := c.reapDead(ctx)
	if err != nil {
		return err
	}
	if kept {
		// A crashed coordinator's container still runs on the profile's
		// layer: nothing may be unmounted or folded under it.
		return nil
	}
	if err := c.sweep(ctx); err != nil {
		return fmt.Errorf("removing stale mounts: %w", err)
	}
	// An `attempts keep` a crash cut short is finished before any layer
	// begins on the head it bumped.
	if err := statestore.ResumeKeep(ctx, c.opt.Podman, statestore.Store{Root: c.root}); err != nil {
		return fmt.Errorf("finishing an interrupted attempts keep: %w", err)
	}
	layers, err := statestore.ReadLayers(c.root)
	if err != nil {
		return err
	}
	for _, l := range layers {
		if l.State == "" || l.State == statestore.LayerActive {
			// A start cut short, or a holder gone without its
			// registration: nothing of it is mounted any more.
			if err := c.settle(ctx, l); err != nil {
				return err
			}
		}
	}
	return c.foldChain(ctx)
}

// checkOldOwner refuses while a coordinator of the layout before layers
// (one exclusive holder writing the profile's layer) left its container
// running; a gone one's record is dropped.
func (c *Component) checkOldOwner(ctx context.Context) error {
	var o struct {
		Workspace string `json:"workspace"`
		Container string `json:"container"`
	}
	path := statestore.SideFile(c.root, "owner.json")
	ok, err := statestore.ReadJSON(path, &o)
	if err != nil || !ok {
		return nil
	}
	if o.Container != "" {
		if exists, err := c.opt.Podman.ContainerExists(ctx, o.Container); err != nil || exists {
			return fmt.Errorf("%w: the sandbox of %q (container %s) writes the profile's layer directly (a lazaret before layered State Anchors); stop it first", statestore.ErrProfileBusy, o.Workspace, o.Container)
		}
	}
	return os.Remove(path)
}

// reapDead deals with the registrations of crashed holders: one whose
// container is gone has its mounts removed, its image mount released and
// its layer made pending (or dropped when empty); one whose container
// still runs is kept (kept is then true).
func (c *Component) reapDead(ctx context.Context) (kept bool, err error) {
	regs, err := statestore.Registrations(c.root)
	if err != nil {
		return false, err
	}
	for _, r := range regs {
		if r.Alive || err != nil {
			if !r.Alive {
				r.Close()
			}
			continue
		}
		exists, cerr := c.opt.Podman.ContainerExists(ctx, r.Container)
		if cerr != nil || exists {
			c.log.Warn("a crashed coordinator's sandbox still runs on the profile's layer", "container", r.Container, "err", cerr)
			kept = true
			r.Close()
			continue
		}
		err = c.reapLayer(ctx, r)
		if err == nil {
			r.Release()
		} else {
			r.Close()
		}
	}
	return kept, err
}

func (c *Component) reapLayer(ctx context.Context, r *statestore.Registered) error {
	c.log.Warn("removing what a crashed sandbox of the profile left", "layer", r.Layer, "workspace", r.Workspace)
	dir := statestore.LayerDir(c.root, r.Layer)
	if err := c.unmountUnder(ctx, dir); err != nil {
		return err
	}
	if r.ImageID != "" {
		if err := c.opt.Podman.ImageUnmount(ctx, r.ImageID); err != nil {
			c.log.Warn("releasing a crashed sandbox's image mount", "err", err)
		}
	}
	layers, err := statestore.ReadLayers(c.root)
	if err != nil {
		return err
	}
	for _, l := range layers {
		if l.ID == r.Layer && (l.State == "" || l.State == statestore.LayerActive) {
			return c.settle(ctx, l)
		}
	}
	return nil
}

// unmountUnder removes the mounts under dir in podman's namespace and the
// fuse-overlayfs daemons serving them.
func (c *Component) unmountUnder(ctx context.Context, dir string) error {
	out, err := c.fs().Mountinfo(ctx)
	if err != nil {
		return err
	}
	all, err := statestore.ParseMountinfo(out)
	if err != nil {
		return err
	}
	if stale := statestore.MountsUnder(all, dir); len(stale) > 0 {
		if err := c.fs().Unmount(ctx, mountPoints(stale)...); err != nil {
			return err
		}
	}
	return c.reapDaemons(ctx, dir)
}

// settle ends an unmounted layer: dropped when it holds no change (or
// never got a record), pending otherwise. Never deletes a change.
func (c *Component) settle(ctx context.Context, l statestore.Layer) error {
	empty := l.State == ""
	if !empty {
		var err error
		if empty, err = statestore.LayerIsEmpty(c.root, l); err != nil {
			c.log.Warn("cannot tell whether a layer is empty; keeping it pending", "layer", l.ID, "err", err)
		}
	}
	if empty {
		if err := c.fs().RemoveAll(ctx, statestore.LayerDir(c.root, l.ID)); err != nil {
			return fmt.Errorf("removing the empty layer %s: %w", l.ID, err)
		}
		return nil
	}
	l.State = statestore.LayerPending
	if l.Ended.IsZero() {
		l.Ended = time.Now().UTC()
	}
	return statestore.WriteLayer(c.root, l, false)
}

// foldChain folds the pending layers that fast-forward the profile's
// layer, oldest first. Runs under the exclusive lock.
func (c *Component) foldChain(ctx context.Context) error {
	head, err := statestore.ReadHead(c.root)
	if err != nil {
		return err
	}
	layers, err := statestore.ReadLayers(c.root)
	if err != nil {
		return err
	}
	for _, l := range statestore.Chain(head, layers) {
		if head, err = c.foldLayer(ctx, head, l); err != nil {
			return err
		}
	}
	return nil
}

func (c *Component) foldLayer(ctx context.Context, head statestore.Head, l statestore.Layer) (statestore.Head, error) {
	l.State = statestore.LayerFolding
	if err := statestore.WriteLayer(c.root, l, false); err != nil {
		return head, err
	}
	if err := statestore.FoldLayer(ctx, c.opt.Podman, c.root, l); err != nil {
		return head, err
	}
	head = statestore.Head{Generation: head.Generation + 1, Head: l.ID, FoldedAt: time.Now().UTC(), FoldedFrom: l.Workspace}
	if err := statestore.WriteHead(c.root, head); err != nil {
		return head, err
	}
	if err := c.fs().RemoveAll(ctx, statestore.LayerDir(c.root, l.ID)); err != nil {
		return head, fmt.Errorf("removing the folded layer %s: %w", l.ID, err)
	}
	c.log.Info(fmt.Sprintf("fast-forwarded the profile's persistent dirs (%s) with the changes of the sandbox of %s (generation %d)",
		strings.Join(l.Dirs, ", "), l.Workspace, head.Generation), "layer", l.ID)
	return head, nil
}

// endLayer runs in Close once this sandbox's overlays are unmounted: its
// layer becomes pending (or is dropped when empty), its hold ends, and the
// pending chain is folded if no other sandbox of the profile runs.
func (c *Component) endLayer(ctx context.Context) error {
	lay := c.lay
	lay.rec.Ended = time.Now().UTC()
	if err := c.settle(ctx, lay.rec); err != nil {
		lay.reg.Close() // found dead by the next start, which settles it
		c.lock.Close()
		return err
	}
	lay.reg.Release()
	c.lock.Close()
	c.lock, c.lay = nil, nil
	ex, err := statestore.TryExclusive(c.root)
	if err != nil || ex == nil {
		return err // another sandbox of the profile runs: the last one folds
	}
	defer ex.Close()
	return c.maintain(ctx)
}

// layerLowers returns the lower dirs above the image's for dir: the
// stacked pending layers' uppers, newest first, then the profile's layer.
func (c *Component) layerLowers(dir string) string {
	var ls []string
	for _, id := range c.lay.lowers {
		upper, _, _ := statestore.LayerPaths(c.root, id, dir)
		ls = append(ls, upper)
	}
	return strings.Join(append(ls, statestore.ProfileLayer(c.root, dir)), ":")
}

// prepareProfileDir makes the profile's layer of dir (a lower dir of the
// mount, so it must exist) and reports whether it is new.
func prepareProfileDir(od *vault.Dir, dir string) (fresh bool, err error) {
	name := domain.OverlayName(dir) + "_changes"
	if _, err := os.Lstat(od.Join(name)); errors.Is(err, os.ErrNotExist) {
		fresh = true
	}
	return fresh, os.MkdirAll(filepath.Join(od.Path(), name), 0o755)
}
