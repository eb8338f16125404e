package statestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Overlay markers. The kernel's overlayfs (userxattr mode, the only one a
// rootless user namespace may mount) marks a deleted entry with a
// character device 0:0 of the same name and a directory that hides the
// layers below it with user.overlay.opaque = "y" (measured on this
// machine's kernel: `rm f` leaves `c--------- 0,0 f`, `rm -rf d; mkdir d`
// leaves d with user.overlay.opaque=y). fuse-overlayfs writes the same
// character devices where it may, and reads the OCI forms: a ".wh.NAME"
// file for a deleted NAME and a ".wh..wh..opq" file in an opaque dir.
const (
	whiteoutPrefix = ".wh."
	opaqueFile     = ".wh..wh..opq"
	kernelOpaque   = "user.overlay.opaque"
)

// opaqueXattrs are the xattrs that make a directory opaque with value "y"
// ("x" on the kernel's marks a dir holding xattr whiteouts, not an opaque one).
var opaqueXattrs = []string{kernelOpaque, "trusted.overlay.opaque", "user.fuseoverlayfs.opaque"}

// Fold moves the contents of an overlay upper dir into the layer right
// below it (target), so that target alone shows what the two showed
// stacked: a deleted entry (whiteout) replaces the target's entry with
// the whiteout, which goes on hiding the image's; a file, a symlink or an
// opaque dir replaces the target's entry; a plain dir is merged into the
// target's dir of the same name (into a non-dir there it goes as is, made
// opaque, as the target's entry hid what lies below). driver names the
// overlay implementation whose marks an opaque dir gets (DriverOverlay's
// xattr, fuse-overlayfs's file).
//
// Everything moves by rename on one filesystem: a fold costs one rename
// per changed entry, not a copy. It runs as root of the user namespace
// (the layers hold files of the sandbox's sub-uids). A fold cut short
// (crash) is finished by folding the same dirs again: what already moved
// is no longer in upper. upper is left empty (or gone, when target did
// not exist and upper became it).
func Fold(upper, target, driver string) error {
	if _, err := os.Lstat(target); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Lstat(upper); errors.Is(err, os.ErrNotExist) {
			return nil // folded before
		}
		return os.Rename(upper, target)
	} else if err != nil {
		return err
	}
	if _, err := os.Lstat(upper); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return foldDir(upper, target, driver)
}

func foldDir(u, t, driver string) error {
	f, err := os.Open(u)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == opaqueFile {
			continue // the dir's own mark: the dir was handled as opaque by its parent
		}
		if err := foldEntry(filepath.Join(u, name), t, name, driver); err != nil {
			return err
		}
	}
	return nil
}

func foldEntry(up, t, name, driver string) error {
	tp := filepath.Join(t, name)
	if strings.HasPrefix(name, whiteoutPrefix) {
		// An OCI-form whiteout of fuse-overlayfs: the target's entry goes.
		if err := os.RemoveAll(filepath.Join(t, strings.TrimPrefix(name, whiteoutPrefix))); err != nil {
			return err
		}
		return replace(up, tp)
	}
	fi, err := os.Lstat(up)
	if err != nil {
		return err
	}
	// A real entry placed in the target ends an OCI-form whiteout there.
	hidden, err := removeIfExists(filepath.Join(t, whiteoutPrefix+name))
	if err != nil {
		return err
	}
	if !fi.IsDir() || IsOpaque(up) {
		return replace(up, tp)
	}
	ti, err := os.Lstat(tp)
	switch {
	case err == nil && ti.IsDir():
		if err := foldDir(up, tp, driver); err != nil {
			return err
		}
		if err := copyDirMeta(up, tp, fi); err != nil {
			return err
		}
		return os.Remove(up)
	case err == nil:
		// The target's non-dir (a file, a whiteout) hid the layers
		// below it from the upper's dir: the dir stays hiding them.
		hidden = true
		if err := os.RemoveAll(tp); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if err := os.Rename(up, tp); err != nil {
		return err
	}
	if hidden {
		return markOpaque(tp, driver)
	}
	return nil
}

// replace puts up in the place of whatever tp is.
func replace(up, tp string) error {
	if err := os.RemoveAll(tp); err != nil {
		return err
	}
	return os.Rename(up, tp)
}

func removeIfExists(p string) (bool, error) {
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, os.RemoveAll(p)
}

// copyDirMeta gives the target's dir the upper's owner, mode and times:
// the upper's copy of a dir is the newer one (a chmod in the sandbox
// copies the dir up).
func copyDirMeta(up, tp string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no stat", up)
	}
	if err := os.Lchown(tp, int(st.Uid), int(st.Gid)); err != nil && os.Geteuid() == 0 {
		return err
	}
	if err := os.Chmod(tp, fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(st.Atim.Nano()), unix.NsecToTimespec(st.Mtim.Nano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, tp, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// IsOpaque reports whether dir is marked opaque by either overlay driver.
func IsOpaque(dir string) bool {
	buf := make([]byte, 8)
	for _, x := range opaqueXattrs {
		n, err := unix.Lgetxattr(dir, x, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	_, err := os.Lstat(filepath.Join(dir, opaqueFile))
	return err == nil
}

// IsWhiteout reports whether fi is an overlay whiteout (char device 0:0).
func IsWhiteout(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode()&os.ModeCharDevice != 0 && st.Rdev == 0
}

func markOpaque(dir, driver string) error {
	if driver == "fuse-overlayfs" {
		f, err := os.OpenFile(filepath.Join(dir, opaqueFile), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	return unix.Lsetxattr(dir, kernelOpaque, []byte("y"), 0)
}

// LayerEmpty reports whether an upper dir holds no change at all (it is
// missing or has no entries): such a layer is dropped, not kept pending.
func LayerEmpty(upper string) (bool, error) {
	f, err := os.Open(upper)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) == 0 && (err == nil || errors.Is(err, io.EOF)) {
		return true, nil
	}
	return false, nil
}
