// Package stateanchor is the State Anchor component of the coordinator: it
// persists container directories such as /usr across sandbox restarts and
// image updates with a fuse-overlayfs per directory (the image's directory
// as lower layer, the domain's <name>_changes as upper layer), mounted
// inside `podman unshare` so that rootless containers see it, and bound
// over the directory in the container. The layout is internal/statestore.
package stateanchor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/overlayfs"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// Options configure a State Anchor.
type Options struct {
	Anchor *domain.Anchor
	// Image is the profile's image reference; its current ID becomes the
	// lower layer.
	Image string
	// Dirs are the profile's persistent_dirs (validated again here).
	Dirs   []string
	Podman *podman.Client
	Log    *slog.Logger
	// FuseOverlayfs is the fuse-overlayfs executable ("fuse-overlayfs" on
	// PATH when empty).
	FuseOverlayfs string
	// Driver picks the overlay implementation of new changes dirs:
	// DriverAuto (empty), DriverOverlay or DriverFuse. An existing changes
	// dir keeps the driver it was made with.
	Driver string
	// Persist is the profile's persist mode: config.PersistProfile shares
	// the profile's overlays (see Locate); empty or PersistWorkspace keeps
	// them in the Domain Root.
	Persist string
}

// Overlay drivers (internal/adapter/overlayfs).
const (
	DriverAuto    = overlayfs.DriverAuto
	DriverOverlay = overlayfs.DriverOverlay // kernel overlayfs in the user namespace
	DriverFuse    = overlayfs.DriverFuse    // FUSE daemon
)

// Component mounts the State Anchor of one domain. It implements
// sandbox.Component and sandbox.Deferred: Prepare adds the bind mounts to
// the container spec and starts mounting, Ready waits for the mounts,
// Close unmounts. It is not safe for concurrent use; the
// Session Coordinator, which holds the domain's lock, drives it.
type Component struct {
	opt Options
	log *slog.Logger

	root    string                  // canonical overlay root (Store.Root)
	lock    *statestore.ProfileLock // shared hold of a shared root, nil otherwise
	lay     *layering               // this sandbox's layer on a shared root, nil otherwise
	imageID string                  // image mount this component holds, "" when none
	mu      sync.Mutex              // guards mounted while the overlays mount side by side
	mounted []string                // merged dirs this component mounted

	// The overlays are mounted in the background after Prepare: done is
	// closed when that ends, with mountErr its outcome; cancel stops it.
	done     chan struct{}
	mountErr error
	cancel   context.CancelFunc
}

// New returns the State Anchor component for opt.
func New(opt Options) *Component {
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opt.FuseOverlayfs == "" {
		opt.FuseOverlayfs = "fuse-overlayfs"
	}
	return &Component{opt: opt, log: log.With("component", "stateanchor")}
}

// Name implements sandbox.Component.
func (c *Component) Name() string { return "stateanchor" }

// Prepare implements sandbox.Component. It first removes whatever a crashed
// predecessor left of this domain's overlays, makes each persistent dir's
// mount point and binds it over its dir in spec, then mounts one overlay
// per dir on the current image in the background: the coordinator's start
// gate holds the container's create until Ready.
func (c *Component) Prepare(ctx context.Context, spec *podman.ContainerSpec) error {
	if len(c.opt.Dirs) == 0 {
		return nil
	}
	if err := statestore.ValidateDirs(c.opt.Dirs); err != nil {
		return err
	}
	switch c.opt.Driver {
	case "", DriverAuto, DriverOverlay, DriverFuse:
	default:
		return fmt.Errorf("state anchor: unknown overlay driver %q", c.opt.Driver)
	}
	if c.opt.Anchor == nil || c.opt.Podman == nil {
		return errors.New("state anchor: no domain anchor or podman client")
	}
	root, err := c.openRoot(ctx)
	if err != nil {
		return fmt.Errorf("state anchor: %w", err)
	}
	// The image lookup does not depend on the sweep: run the two podman
	// calls side by side (each costs a podman start, ~50 ms, on the cold
	// start's critical path).
	type inspected struct {
		img *podman.ImageInfo
		err error
	}
	imgc := make(chan inspected, 1)
	go func() {
		img, err := c.inspectImage(ctx)
		imgc <- inspected{img, err}
	}()
	var sweepErr error
	if c.lay == nil {
		// A shared root was swept by joinProfile, under its lock.
		sweepErr = c.sweep(ctx)
	}
	in := <-imgc
	if sweepErr != nil {
		return fmt.Errorf("state anchor: removing stale mounts: %w", sweepErr)
	}
	img, err := in.img, in.err
	if err != nil {
		return fmt.Errorf("state anchor: %w", err)
	}
	base, err := c.imageRoot(ctx, img)
	if err != nil {
		return fmt.Errorf("state anchor: %w", err)
	}
	empty := filepath.Join(root, ".empty")
	ed, err := vault.Open(root, ".empty", true, 0o755)
	if err != nil {
		return fmt.Errorf("state anchor: %w", err)
	}
	ed.Close()

	// The bind mounts' sources must exist for podman's checks; the
	// overlays are mounted on them while podman starts (Ready).
	for _, dir := range c.opt.Dirs {
		if err := c.makeMergedDir(dir); err != nil {
			return fmt.Errorf("state anchor %s: %w", dir, err)
		}
	}
	spec.Mounts = append(spec.Mounts, c.bindMounts()...)
	// Cancelled by Close only: Prepare's context ends when the
	// coordinator's prepare step does, before the mounts are needed.
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		start := time.Now()
		c.mountErr = c.mountDirs(mctx, base, empty, img)
		c.log.Debug("overlays mounted", "took", time.Since(start).Round(time.Millisecond), "ok", c.mountErr == nil)
	}()
	return nil
}

// Ready implements sandbox.Deferred: it waits for the overlays Prepare
// started mounting. The container's runtime is held until it returns nil.
func (c *Component) Ready(ctx context.Context) error {
	if c.done == nil {
		return nil // nothing to mount
	}
	select {
	case <-c.done:
		return c.mountErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// makeMergedDir creates the dir the overlay of dir is mounted on, in the
// vault, so that the bind mount's source exists before the overlay does.
func (c *Component) makeMergedDir(dir string) error {
	if c.lay != nil {
		return nil // made with the layer (joinProfile)
	}
	odir, _, _, merged := c.paths(dir)
	od, err := vault.Open(c.root, filepath.Base(odir), true, 0o755)
	if err != nil {
		return err
	}
	defer od.Close()
	return os.MkdirAll(od.Join(filepath.Base(merged)), 0o755)
}

// openRoot creates (or seals) the overlay root of this domain as a vault,
// canonicalizes it and, when it is the profile's shared one, takes the
// profile's lock.
func (c *Component) openRoot(ctx context.Context) (string, error) {
	st := statestore.Locate(c.opt.Anchor, c.opt.Persist)
	// The changes dirs hold what the agent made, setuid files owned by the
	// user included: no other user of the host may reach them. Checked at
	// every start, before anything is created or sealed, so a loosened
	// mode is refused with its fix (an open directory descriptor another
	// user took meanwhile would outlive a silent repair) and nothing is
	// left half-made.
	if err := statestore.CheckClosed(c.opt.Anchor.DataRoot, st.Root); err != nil {
		return "", err
	}
	// Host git run by the user anywhere under the data root must never
	// reach what the agent wrote in the changes dirs: the root is mode 000.
	if err := vault.Seal(st.Root); err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(st.Root)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(root, ",:=\\") {
		return "", fmt.Errorf("overlay path %s has a character fuse-overlayfs options cannot take (',', ':', '=', '\\')", root)
	}
	if st.Legacy {
		c.log.Info("keeping this workspace's own State Anchor (changes made before it was per profile; `lazaret state reset` moves it to the profile's)", "root", root)
	}
	c.root = root
	if st.Shared {
		if err := c.joinProfile(ctx); err != nil {
			return "", err
		}
	} else if err := statestore.ResumeKeep(ctx, c.opt.Podman, statestore.Store{Root: root}); err != nil {
		// A workspace's own store (persist = "workspace") an interrupted
		// `attempts keep` was replacing; the domain's lock is held.
		return "", fmt.Errorf("finishing an interrupted attempts keep: %w", err)
	}
	return root, nil
}

// imageRoot returns the directory holding the image's root filesystem as
// seen in podman's namespace. A single-layer image (the default image is
// one) is its layer's diff directory, used in place: no podman call, and
// nothing to release. Any other image is mounted through podman (about
// 130 ms, measured), and the mount is recorded so that a crashed start's
// mount is released by the next one.
func (c *Component) imageRoot(ctx context.Context, img *podman.ImageInfo) (string, error) {
	if dir, ok := img.SingleLayerDir(); ok {
		return dir, nil
	}
	base, err := c.opt.Podman.ImageMount(ctx, img.ID)
	if err != nil {
		return "", err
	}
	c.imageID = img.ID
	if c.lay != nil {
		// A shared root's sandboxes each hold their own image mount:
		// recorded in the registration, released by whoever finds it dead.
		c.lay.holder.ImageID = img.ID
		return base, c.lay.reg.Update(c.lay.holder)
	}
	// Written after the mount: a crash between the two leaks one mount
	// count of the image, which is harmless; the opposite order could make
	// the next start release somebody else's mount.
	if err := statestore.WriteJSON(statestore.SideFile(c.root, statestore.HoldFile), statestore.Hold{ImageID: img.ID}); err != nil {
		return "", err
	}
	return base, nil
}

// paths returns the overlay dirs of dir under the canonical root: base
// holds its record; on a shared root the others are this sandbox's layer.
func (c *Component) paths(dir string) (base, changes, work, merged string) {
	name := domain.OverlayName(dir)
	base = filepath.Join(c.root, name)
	if c.lay != nil {
		changes, work, merged = statestore.LayerPaths(c.root, c.lay.rec.ID, dir)
		return base, changes, work, merged
	}
	return base, filepath.Join(base, name+"_changes"), filepath.Join(base, name+"_work"), filepath.Join(base, name+"_merged")
}

// mountDirs mounts every dir's overlay side by side: each is a podman
// namespace entry, a shell and a fuse-overlayfs start of its own (about
// 60-80 ms each, overlapping podman's start since the start gate), and they touch
// nothing in common but c.mounted. The first error is returned; what did
// mount is in c.mounted for Close.
func (c *Component) mountDirs(ctx context.Context, base, empty string, img *podman.ImageInfo) error {
	errs := make([]error, len(c.opt.Dirs))
	var wg sync.WaitGroup
	for i, dir := range c.opt.Dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.mountDir(ctx, dir, base, empty, img); err != nil {
				errs[i] = fmt.Errorf("state anchor %s: %w", dir, err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Component) mountDir(ctx context.Context, dir, base, empty string, img *podman.ImageInfo) error {
	odir, changes, work, merged := c.paths(dir)
	// Host-side work in the overlay dir goes through a descriptor opened
	// in the vault; podman unshare (root of the user namespace) takes the
	// paths below it.
	od, err := vault.Open(c.root, filepath.Base(odir), true, 0o755)
	if err != nil {
		return err
	}
	defer od.Close()
	fresh, upperFresh, lowers, err := c.prepareDirs(od, dir, changes, work, merged)
	if err != nil {
		return err
	}
	prev, err := statestore.ReadRecord(od.Path())
	if err != nil {
		c.log.Warn("unreadable overlay record; rewriting it", "dir", dir, "err", err)
		prev = nil
	}
	driver := c.driverFor(fresh, prev)
	logf := filepath.Join(filepath.Dir(changes), "mount.log")
	out, err := c.fs().Mount(ctx, overlayfs.Overlay{Image: base, Dir: dir, Empty: empty,
		Upper: changes, Work: work, Merged: merged, NewUpper: upperFresh,
		FuseOverlayfs: c.opt.FuseOverlayfs, Log: logf, Driver: driver, Lowers: lowers})
	if err != nil {
		return fmt.Errorf("mounting the overlay (%s) on %s: %w", driver, merged, err)
	}
	c.mu.Lock()
	c.mounted = append(c.mounted, merged)
	c.mu.Unlock()
	used := strings.TrimSpace(out)
	if used != DriverOverlay && used != DriverFuse {
		return fmt.Errorf("mounting the overlay on %s: unexpected output %q", merged, out)
	}
	if dir == "/etc" {
		// resolv.conf, hosts and hostname must never come from an overlay:
		// podman binds its own over them, except resolv.conf with
		// --network none (measured), where the image's or an agent's
		// planted copy would show. Removing them from the merged view
		// (whiteouts in etc_changes) leaves podman's mounts or nothing.
		if err := c.fs().Remove(ctx, filepath.Join(merged, "resolv.conf"),
			filepath.Join(merged, "hosts"), filepath.Join(merged, "hostname")); err != nil {
			return fmt.Errorf("removing resolv.conf, hosts and hostname from the /etc overlay: %w", err)
		}
	}

	rec := statestore.Record{Dir: dir, Image: c.opt.Image, ImageID: img.ID, ImageDigest: img.Digest, MountedAt: time.Now().UTC(), Driver: used}
	if prev != nil {
		rec.PreviousImageID = prev.PreviousImageID
		if prev.ImageID != "" && prev.ImageID != img.ID {
			// Image update inheritance: the new image is the lower layer,
			// the changes made on the old one stay on top of it.
			c.log.Info("image changed; keeping the overlay's changes on the new image", "dir", dir, "old", short(prev.ImageID), "new", short(img.ID))
			rec.PreviousImageID = prev.ImageID
		}
	}
	if err := statestore.WriteJSON(od.Join(statestore.RecordFile), rec); err != nil {
		return err
	}
	c.log.Debug("mounted", "dir", dir, "merged", merged, "image", short(img.ID), "driver", used)
	return nil
}

// prepareDirs makes the dirs of dir's overlay. It reports whether the
// changes that decide the driver are new (the profile's layer on a shared
// root), whether the upper dir is new, and the lower dirs above the
// image's (shared root only).
func (c *Component) prepareDirs(od *vault.Dir, dir, changes, work, merged string) (fresh, newUpper bool, lowers string, err error) {
	if c.lay != nil {
		fresh, err = prepareProfileDir(od, dir)
		return fresh, true, c.layerLowers(dir), err
	}
	if _, err := os.Lstat(od.Join(filepath.Base(changes))); errors.Is(err, os.ErrNotExist) {
		fresh = true
	}
	for _, d := range []string{changes, work, merged} {
		if err := os.MkdirAll(od.Join(filepath.Base(d)), 0o755); err != nil {
			return false, false, "", err
		}
	}
	return fresh, fresh, "", nil
}

// driverFor picks the driver for a changes dir: the one it was made with,
// fuse-overlayfs for one of unknown origin, the configured one for a new
// one.
func (c *Component) driverFor(fresh bool, prev *statestore.Record) string {
	switch {
	case prev != nil && prev.Driver != "":
		return prev.Driver
	case !fresh:
		return DriverFuse
	case c.opt.Driver == "":
		return DriverAuto
	}
	return c.opt.Driver
}

// bindMounts returns the bind mounts of the merged views over their dirs,
// in the order of the profile's dirs. Prepare adds them to the spec.
func (c *Component) bindMounts() []podman.Mount {
	var ms []podman.Mount
	for _, dir := range c.opt.Dirs {
		_, _, _, merged := c.paths(dir)
		ms = append(ms, podman.Mount{Type: "bind", Source: merged, Target: dir})
	}
	return ms
}

// Started implements sandbox.Component.
func (c *Component) Started(context.Context, string) error { return nil }

// Close implements sandbox.Component: it unmounts the overlays this
// component mounted and releases its image mount. It is safe to call more
// than once and after a failed Prepare. The container must be stopped
// first; a mount still in use is detached lazily.
func (c *Component) Close(ctx context.Context) error {
	if c.done != nil {
		// A start that failed elsewhere: stop mounting, then undo what
		// did mount.
		c.cancel()
		<-c.done
	}
	var errs []error
	if len(c.mounted) > 0 {
		if err := c.fs().Unmount(ctx, c.mounted...); err != nil {
			errs = append(errs, fmt.Errorf("unmounting overlays: %w", err))
		}
		if err := c.reapDaemons(ctx, c.root); err != nil {
			errs = append(errs, err)
		}
		c.mounted = nil
	}
	if c.imageID != "" {
		if err := c.opt.Podman.ImageUnmount(ctx, c.imageID); err != nil {
			errs = append(errs, fmt.Errorf("releasing the image mount: %w", err))
		} else if err := os.Remove(statestore.SideFile(c.root, statestore.HoldFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		c.imageID = ""
	}
	if c.lay != nil {
		// This sandbox's layer ends only once nothing of it is
		// mounted; after an error it is left for the next start to
		// find, as after a crash.
		if len(errs) == 0 {
			errs = append(errs, c.endLayer(ctx))
		} else {
			c.lay.reg.Close()
			c.lay = nil
		}
	}
	if len(errs) == 0 {
		if err := c.lock.Release(); err != nil {
			errs = append(errs, err)
		}
	} else {
		c.lock.Close()
	}
	c.lock = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("state anchor: %w", err)
	}
	return nil
}

// sweep removes what a crashed predecessor of this domain left: mounts
// under the domain's overlay root in podman's namespace, fuse-overlayfs
// daemons serving them, and an image mount it never released. Nothing
// outside this domain's overlay root is touched.
func (c *Component) sweep(ctx context.Context) error {
	out, err := c.fs().Mountinfo(ctx)
	if err != nil {
		return err
	}
	all, err := statestore.ParseMountinfo(out)
	if err != nil {
		return err
	}
	stale := statestore.MountsUnder(all, c.root)
	if len(stale) > 0 {
		c.log.Warn("removing stale overlay mounts of this domain", "count", len(stale))
		if err := c.fs().Unmount(ctx, mountPoints(stale)...); err != nil {
			return err
		}
	}
	if err := c.reapDaemons(ctx, c.root); err != nil {
		return err
	}
	var h statestore.Hold
	ok, err := statestore.ReadJSON(statestore.SideFile(c.root, statestore.HoldFile), &h)
	if err != nil {
		c.log.Warn("unreadable image mount marker; dropping it", "err", err)
	}
	if ok && h.ImageID != "" {
		c.log.Warn("releasing an image mount left by a crashed start", "image", short(h.ImageID))
		if err := c.opt.Podman.ImageUnmount(ctx, h.ImageID); err != nil {
			c.log.Warn("releasing stale image mount", "err", err)
		}
	}
	if err := os.Remove(statestore.SideFile(c.root, statestore.HoldFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// reapDaemons waits briefly for the fuse-overlayfs daemons serving mounts
// under root to exit after their unmount, then terminates the rest (a
// daemon whose mount was detached by a crash, or that hangs): SIGTERM after
// 2 s, SIGKILL after 4 s.
func (c *Component) reapDaemons(ctx context.Context, root string) error {
	start := time.Now()
	var termed, killed bool
	for {
		ds, err := fuseDaemons("/proc", root)
		if err != nil {
			return err
		}
		if len(ds) == 0 {
			return nil
		}
		var sig syscall.Signal
		switch waited := time.Since(start); {
		case waited > 5*time.Second:
			return fmt.Errorf("fuse-overlayfs pid %d (%s) does not exit", ds[0].PID, ds[0].MountPoint)
		case waited > 4*time.Second && !killed:
			sig, killed = syscall.SIGKILL, true
		case waited > 2*time.Second && !termed:
			sig, termed = syscall.SIGTERM, true
		}
		if sig != 0 {
			for _, d := range ds {
				c.log.Warn("stopping fuse-overlayfs of this domain", "pid", d.PID, "mountpoint", d.MountPoint, "signal", sig.String())
				if err := signal(d.PID, sig); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func short(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// NewComponent is New for a profile: its image and persistent_dirs (with
// the package database config added to /usr, which the log says; the
// starting CLI says it on the terminal).
func NewComponent(p *config.Profile, a *domain.Anchor, pc *podman.Client, log *slog.Logger) *Component {
	c := New(Options{Anchor: a, Image: p.Image, Dirs: p.PersistentDirs, Podman: pc, Log: log, Persist: p.Persist})
	if n := p.PackageStateNote(); n != "" {
		c.log.Info(n)
	}
	return c
}

// fs works in podman's namespaces: mounts, unmounts, removals.
func (c *Component) fs() *overlayfs.Client { return overlayfs.New(c.opt.Podman) }

// mountPoints are the mount points of ms.
func mountPoints(ms []statestore.Mount) []string {
	ps := make([]string, len(ms))
	for i, m := range ms {
		ps[i] = m.MountPoint
	}
	return ps
}

// ForkSource is what an attempt forked from this running sandbox copies:
// the store it mounts and, on a profile's shared store, this sandbox's
// layer (whose lower layers the copy stacks as the mount does). Valid
// once the component is ready.
func (c *Component) ForkSource() statestore.ForkSource {
	st := statestore.Locate(c.opt.Anchor, c.opt.Persist)
	if c.root != "" {
		st.Root = c.root
	}
	src := statestore.ForkSource{Store: st, Dirs: c.opt.Dirs}
	if c.lay != nil {
		src.Active = c.lay.rec.ID
	}
	return src
}
