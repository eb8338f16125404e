package statestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/adapter/overlayfs"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// ForkSource is what an attempt copies.
type ForkSource struct {
	Store Store    // the parent's: Locate(parent, persist)
	Dirs  []string // the profile's persistent dirs
	// Active is the layer ID of the parent's running sandbox (shared
	// store), "" when it is stopped.
	Active string
}

// ForkResult is what Fork made.
type ForkResult struct {
	Mode  string // "reflink", "copy", or "" when there was nothing to copy
	Bytes int64  // apparent size of the copy
	// Layers are the sandbox layers (pending and active) folded into the
	// copy on top of the profile's layer: Keep drops them with the
	// profile's layer it replaces.
	Layers []string
}

// fileOps are the file operations of Fork and Keep on layers. In
// production each runs as root of podman's user namespace (nsOps), the
// only user that may read, move and remove every file of a layer; tests
// run them as the test's user.
type fileOps struct {
	copy       func(ctx context.Context, src, dst string) (mode string, err error)
	canReflink func(ctx context.Context, src, dir string) (bool, error)
	fold       func(ctx context.Context, upper, target, driver string) error
	removeAll  func(ctx context.Context, paths ...string) error
	usage      func(ctx context.Context, paths ...string) (map[string]int64, error)
	free       func(path string) (int64, error)
}

func nsOps(pc *podman.Client) fileOps {
	fs := overlayfs.New(pc)
	return fileOps{
		copy:       fs.Copy,
		canReflink: fs.CanReflink,
		fold: func(ctx context.Context, upper, target, driver string) error {
			return FoldInNamespace(ctx, pc, upper, target, driver)
		},
		removeAll: fs.RemoveAll,
		usage:     fs.DiskUsage,
		free:      freeBytes,
	}
}

// freeBytes is what an unprivileged user may still write on path's file
// system.
func freeBytes(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// Fork makes an attempt's State Anchor from its parent's: for every
// persistent dir, dst's <N>/<N>_changes shows what the parent's sandbox
// shows (a stopped parent: what its next start would show), and the
// dir's record (image, driver) is the parent's, so the attempt mounts the
// same base with the same driver. dst is the attempt's own root, holding a
// single changes dir per persistent dir (as persist = "workspace"): no
// layers, and nothing shared with the parent.
//
// On a profile's shared store a sandbox sees the profile's layer under
// the pending layers it stacks (Chain, at its start) and its own layer;
// the copy folds the same stack, bottom first: the profile's layer is
// copied (reflinked where the file system clones) into a temporary dir of
// dst, each layer above it is copied beside it and folded in (Fold, one
// rename per entry, whiteouts and opaque dirs honoured), and the result
// renamed into place. The layers folded are returned, for Keep. A store of
// the domain's own is its changes dir alone.
//
// Without reflinks the copy needs the sources' size (apparent, du -b) free
// on dst's file system: Fork refuses up front when it is not, naming both.
// dst's root must be absent or empty; it is made a vault on a path closed
// to other users (CheckClosed), as a start makes it. A failure (no space
// left among them) removes all Fork made: there is no half-made attempt.
//
// The caller keeps the sources still: for a stopped parent it holds the
// profile's lock shared (ShareProfile, so no fold rewrites the profile's
// layer) and the parent's domain lock (no start); for a running parent its
// coordinator has paused the sandbox (SIGSTOP) for as long as Fork runs.
func Fork(ctx context.Context, pc *podman.Client, src ForkSource, dst Store) (ForkResult, error) {
	return fork(ctx, nsOps(pc), src, dst)
}

func fork(ctx context.Context, ops fileOps, src ForkSource, dst Store) (ForkResult, error) {
	f, err := prepareFork(ctx, ops, src, dst)
	if err != nil {
		return ForkResult{}, err
	}
	if err := f.Copy(ctx); err != nil {
		return ForkResult{}, err
	}
	return f.Finish(ctx)
}

// PreparedFork is a Fork planned and checked (what to stack, whether the
// file system clones, whether a plain copy fits) and not copied yet: a
// running parent is paused only for Copy (measured: the reflink probe and
// the measures are each a podman unshare of about 100 ms).
type PreparedFork struct {
	ops    fileOps
	dst    Store
	plan   []forkDir
	layers []string
	undo   func(context.Context, fileOps)
	res    ForkResult
	made   []string
}

// PrepareFork is Fork's first part: nothing is copied yet; dst's root is
// made. Copy, then Finish, complete it; Abort (or a failed Copy or
// Finish) removes what it made.
func PrepareFork(ctx context.Context, pc *podman.Client, src ForkSource, dst Store) (*PreparedFork, error) {
	return prepareFork(ctx, nsOps(pc), src, dst)
}

func prepareFork(ctx context.Context, ops fileOps, src ForkSource, dst Store) (*PreparedFork, error) {
	if err := ValidateDirs(src.Dirs); err != nil {
		return nil, err
	}
	if dst.Shared {
		return nil, fmt.Errorf("fork: the attempt's State Anchor must be a root of its own (%s is a profile's shared one)", dst.Root)
	}
	plan, layers, err := planFork(src)
	if err != nil {
		return nil, err
	}
	f := &PreparedFork{ops: ops, dst: dst, plan: plan, layers: layers}
	if len(plan) == 0 {
		return f, nil
	}
	if f.undo, err = openForkRoot(dst); err != nil {
		return nil, err
	}
	if err := checkRoom(ctx, ops, plan, dst.Root); err != nil {
		f.Abort(ctx)
		return nil, err
	}
	return f, nil
}

// Copy copies and folds the layers: the part that must see the parent
// still.
func (f *PreparedFork) Copy(ctx context.Context) error {
	if len(f.plan) == 0 {
		return nil
	}
	f.res.Mode = overlayfs.CopyReflink
	for _, fd := range f.plan {
		mode, err := forkOne(ctx, f.ops, fd, f.dst.Root)
		if err != nil {
			f.Abort(ctx)
			return err
		}
		if mode != overlayfs.CopyReflink {
			f.res.Mode = overlayfs.CopyPlain
		}
		f.made = append(f.made, filepath.Join(f.dst.Root, fd.name, fd.name+"_changes"))
	}
	return nil
}

// Finish measures the copy and returns what the fork made.
func (f *PreparedFork) Finish(ctx context.Context) (ForkResult, error) {
	if len(f.made) > 0 {
		sizes, err := f.ops.usage(ctx, f.made...)
		if err != nil {
			f.Abort(ctx)
			return ForkResult{}, fmt.Errorf("fork: measuring the copy: %w", err)
		}
		for _, n := range sizes {
			f.res.Bytes += n
		}
	}
	f.res.Layers = f.layers
	return f.res, nil
}

// Abort removes what the fork made.
func (f *PreparedFork) Abort(ctx context.Context) {
	if f.undo != nil {
		f.undo(ctx, f.ops)
		f.undo = nil
	}
}

// forkDir is one persistent dir's part of a fork.
type forkDir struct {
	name   string   // its overlay name
	layers []string // what to stack, bottom first: real paths, for the user namespace
	record *Record
	driver string // the overlay whose marks the layers carry
}

// planFork lists, for every dir that has anything to copy, the layers a
// sandbox of src stacks; layers are the sandbox layers among them.
func planFork(src ForkSource) (plan []forkDir, layers []string, err error) {
	st := src.Store
	var stack []Layer
	switch {
	case st.Shared:
		if stack, err = stackedLayers(st.Root, src.Active); err != nil {
			return nil, nil, err
		}
	case src.Active != "":
		return nil, nil, fmt.Errorf("fork: layer %s given for %s, which has no layers (not a profile's shared store)", src.Active, st.Root)
	}
	for _, l := range stack {
		layers = append(layers, l.ID)
	}
	for _, dir := range src.Dirs {
		fd, err := planDir(st, stack, dir)
		if err != nil {
			return nil, nil, err
		}
		if len(fd.layers) > 0 {
			plan = append(plan, fd)
		}
	}
	return plan, layers, nil
}

func planDir(st Store, stack []Layer, dir string) (forkDir, error) {
	fd := forkDir{name: domain.OverlayName(dir), driver: overlayfs.DriverOverlay}
	rec, err := st.Record(dir)
	if err != nil {
		return fd, fmt.Errorf("fork: %s: %w", dir, err)
	}
	fd.record = rec
	if rec != nil && rec.Driver != "" {
		fd.driver = rec.Driver
	}
	if st.HasChanges(dir) {
		changes, _, _ := st.OverlayPaths(dir)
		fd.layers = append(fd.layers, changes)
	}
	if len(stack) == 0 {
		return fd, nil
	}
	ld, err := openLayers(st.Root, false)
	if err != nil {
		return fd, err
	}
	defer ld.Close()
	for _, l := range stack {
		rel := filepath.Join(l.ID, fd.name, "upper")
		if _, err := os.Lstat(ld.Join(rel)); errors.Is(err, os.ErrNotExist) {
			continue // begun before dir was persistent
		} else if err != nil {
			return fd, err
		}
		if empty, err := LayerEmpty(ld.Join(rel)); err == nil && empty {
			continue // nothing to fold; an unreadable one is copied
		}
		fd.layers = append(fd.layers, filepath.Join(st.Root, LayersDir, rel))
	}
	return fd, nil
}

// stackedLayers returns the sandbox layers over the profile's layer of
// root, bottom first, as a sandbox mounts them: with no active layer, the
// chain a start would stack now; with one, the layers it stacked at its
// start (its parents, down to the head: nothing folds while it runs) and
// itself.
func stackedLayers(root, active string) ([]Layer, error) {
	head, err := ReadHead(root)
	if err != nil {
		return nil, err
	}
	all, err := ReadLayers(root)
	if err != nil {
		return nil, err
	}
	if active == "" {
		return Chain(head, all), nil
	}
	byID := map[string]Layer{}
	for _, l := range all {
		byID[l.ID] = l
	}
	top, ok := byID[active]
	if !ok {
		return nil, fmt.Errorf("fork: the running sandbox's layer %s is not in %s", active, root)
	}
	stack := []Layer{top}
	for p := top.Parent; p != head.Head; {
		l, ok := byID[p]
		if !ok || len(stack) > len(all) {
			return nil, fmt.Errorf("fork: layer %s, below the running sandbox's layer %s, is missing (the profile's head is %q)", p, active, head.Head)
		}
		stack = append([]Layer{l}, stack...)
		p = l.Parent
	}
	return stack, nil
}

// openForkRoot makes dst's root a vault on a closed path, as a start does,
// refusing one that holds anything. undo removes what it made.
func openForkRoot(dst Store) (undo func(context.Context, fileOps), err error) {
	if err := CheckClosed(dst.DataRoot, dst.Root); err != nil {
		return nil, err
	}
	created := missingFrom(dst.Root)
	if created == "" {
		names, err := vault.Names(dst.Root)
		if err != nil {
			return nil, err
		}
		if len(names) > 0 {
			return nil, fmt.Errorf("fork: the attempt's State Anchor %s already holds %q", dst.Root, names)
		}
	}
	if err := vault.Seal(dst.Root); err != nil {
		return nil, err
	}
	return func(ctx context.Context, ops fileOps) {
		names, _ := vault.Names(dst.Root)
		var paths []string
		for _, n := range names {
			paths = append(paths, filepath.Join(dst.Root, n))
		}
		if len(paths) > 0 {
			_ = ops.removeAll(ctx, paths...)
		}
		if created == "" {
			return
		}
		// What Fork created, from the root up: only while empty.
		for p := dst.Root; ; p = filepath.Dir(p) {
			if os.Remove(p) != nil || p == created {
				return
			}
		}
	}, nil
}

// missingFrom returns the topmost missing dir of path ("" when path exists).
func missingFrom(path string) string {
	top := ""
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			return top
		}
		top = p
		if p == filepath.Dir(p) {
			return top
		}
	}
}

// checkRoom refuses a copy that does not clone (no reflinks) and is
// bigger than what dst's file system has free: better than filling it
// and failing half-way.
func checkRoom(ctx context.Context, ops fileOps, plan []forkDir, root string) error {
	reflink, err := ops.canReflink(ctx, plan[0].layers[0], root)
	if err != nil || reflink {
		return err
	}
	var srcs []string
	for _, fd := range plan {
		srcs = append(srcs, fd.layers...)
	}
	sizes, err := ops.usage(ctx, srcs...)
	if err != nil {
		return fmt.Errorf("fork: measuring the parent's persistent dirs: %w", err)
	}
	var need int64
	for _, n := range sizes {
		need += n
	}
	free, err := ops.free(root)
	if err != nil {
		return err
	}
	if need > free {
		return fmt.Errorf("fork: the copy of the parent's persistent dirs needs %s and the file system of %s has %s free (it makes no reflinks)",
			byteSize(need), root, byteSize(free))
	}
	return nil
}

// forkOne builds dir's changes in dst's root: the bottom layer copied into
// a temporary dir beside where it goes, each layer above copied beside it
// and folded in, the record written, then the rename into place.
func forkOne(ctx context.Context, ops fileOps, fd forkDir, root string) (mode string, err error) {
	od, err := vault.Open(root, fd.name, true, 0o755)
	if err != nil {
		return "", err
	}
	defer od.Close()
	base := filepath.Join(root, fd.name)
	work := fd.name + "_changes.fork"
	if mode, err = ops.copy(ctx, fd.layers[0], filepath.Join(base, work)); err != nil {
		return "", fmt.Errorf("fork: %w", err)
	}
	for i, layer := range fd.layers[1:] {
		tmp := fmt.Sprintf("%s_changes.fork-%d", fd.name, i+1)
		m, err := ops.copy(ctx, layer, filepath.Join(base, tmp))
		if err != nil {
			return "", fmt.Errorf("fork: %w", err)
		}
		if m != overlayfs.CopyReflink {
			mode = m
		}
		if err := ops.fold(ctx, filepath.Join(base, tmp), filepath.Join(base, work), fd.driver); err != nil {
			return "", fmt.Errorf("fork: %w", err)
		}
		// Emptied by the fold; its parent is the user's own.
		if err := os.Remove(od.Join(tmp)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	if fd.record != nil {
		if err := WriteJSON(od.Join(RecordFile), *fd.record); err != nil {
			return "", err
		}
	}
	// Within one dir: a rename that needs no write permission on the
	// moved dir itself, which may be a sub-uid's.
	return mode, os.Rename(od.Join(work), od.Join(fd.name+"_changes"))
}

// byteSize is n for a person, with the exact count.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTP"[exp], n)
}
