// Package statecmd is what `lazaret state` does on the host: the size,
// mount state and image of each persistent dir's changes, and discarding
// them while no sandbox uses them.
package statecmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/overlayfs"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// ErrInUse is returned by Reset while the overlay is mounted (a sandbox of
// the domain runs).
var ErrInUse = errors.New("the State Anchor is in use by a running sandbox")

// DirState describes one persistent dir of a domain, for `lazaret state`.
type DirState struct {
	Dir     string             `json:"dir"`
	Changes string             `json:"changes"`
	Bytes   int64              `json:"bytes"`   // apparent size of the changes
	Mounted bool               `json:"mounted"` // an overlay of it is mounted now
	Record  *statestore.Record `json:"record,omitempty"`
}

// Inspect reports the State Anchor of each dir in st (Locate). Files in
// the changes may belong to sub-uids of the sandbox, so sizes are taken
// inside podman unshare. A path to the root that other users can search
// is reported first, as a start refuses it (statestore.CheckClosed):
// reading the records would open and seal the vault, and so hide the
// finding without telling anyone.
func Inspect(ctx context.Context, pc *podman.Client, st statestore.Store, dirs []string) ([]DirState, error) {
	if st.DataRoot != "" {
		if err := statestore.CheckClosed(st.DataRoot, st.Root); err != nil {
			return nil, err
		}
	}
	mounts, err := mountsUnderRoot(ctx, pc, st.Root)
	if err != nil {
		return nil, err
	}
	// The root is a vault: paths below it do not resolve for us (nor
	// for mountinfo's canonical names), so canonicalize the root only.
	croot := canonical(st.Root)
	var out []DirState
	var existing []string
	for _, dir := range dirs {
		changes, _, merged := st.OverlayPaths(dir)
		ds := DirState{Dir: dir, Changes: changes}
		for _, m := range mounts {
			if statestore.Within(m.MountPoint, below(croot, st.Root, merged)) || layerMount(croot, m.MountPoint, dir) {
				ds.Mounted = true
			}
		}
		if ds.Record, err = st.Record(dir); err != nil {
			return nil, err
		}
		if st.HasChanges(dir) {
			existing = append(existing, changes)
		}
		out = append(out, ds)
	}
	if len(existing) > 0 {
		sizes, err := duBytes(ctx, pc, existing)
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i].Bytes = sizes[out[i].Changes]
		}
	}
	return out, nil
}

// Reset discards the changes of dir in st: the next start sees the
// image's dir again. It refuses with ErrInUse while the overlay is mounted;
// the caller must also hold the domain's lock (and, for a shared Store,
// the profile's) and check that no sandbox runs.
func Reset(ctx context.Context, pc *podman.Client, st statestore.Store, dir string) error {
	if err := statestore.ValidateDir(dir); err != nil {
		return err
	}
	mounts, err := mountsUnderRoot(ctx, pc, st.Root)
	if err != nil {
		return err
	}
	odir := below(canonical(st.Root), st.Root, st.OverlayDir(dir))
	for _, m := range mounts {
		if statestore.Within(m.MountPoint, odir) {
			return fmt.Errorf("%s: %w (%s is mounted)", dir, ErrInUse, m.MountPoint)
		}
	}
	changes, work, _ := st.OverlayPaths(dir)
	// The changes hold files of sub-uids that only root of the user
	// namespace may delete. rm -rf does not follow symlinks in them.
	if err := overlayfs.New(pc).RemoveAll(ctx, changes, work); err != nil {
		return fmt.Errorf("discarding %s: %w", changes, err)
	}
	d, err := vault.Open(st.Root, domain.OverlayName(dir), false, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := os.Remove(d.Join(statestore.RecordFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// below rebases p, a path under root, on croot (root canonicalized).
func below(croot, root, p string) string {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return filepath.Join(croot, rel)
}

// mountsUnderRoot lists the mounts under the overlay root in podman's
// namespace.
func mountsUnderRoot(ctx context.Context, pc *podman.Client, root string) ([]statestore.Mount, error) {
	out, err := overlayfs.New(pc).Mountinfo(ctx)
	if err != nil {
		return nil, err
	}
	all, err := statestore.ParseMountinfo(out)
	if err != nil {
		return nil, err
	}
	return statestore.MountsUnder(all, canonical(root)), nil
}

// canonical resolves symlinks in p where it exists (mountinfo shows
// canonical paths), else returns p.
func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// duBytes returns the apparent size of each path (du -sb inside podman's
// user namespace).
func duBytes(ctx context.Context, pc *podman.Client, paths []string) (map[string]int64, error) {
	sizes, err := overlayfs.New(pc).DiskUsage(ctx, paths...)
	if err != nil {
		return nil, fmt.Errorf("measuring changes: %w", err)
	}
	return sizes, nil
}

// layerMount reports whether mp is the mount of dir in a sandbox's layer
// of a shared root (<root>/.layers/<id>/N/merged).
func layerMount(croot, mp, dir string) bool {
	_, _, merged := statestore.LayerPaths(croot, "x", dir)
	rel, err := filepath.Rel(filepath.Join(croot, statestore.LayersDir), mp)
	if err != nil {
		return false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	return len(parts) == 3 && parts[1] == filepath.Base(filepath.Dir(merged)) && parts[2] == "merged"
}
