package podman

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/execx"
)

// Rootless podman keeps its mounts (image mounts, container root
// filesystems) in the user and mount namespace of its pause process, which
// `podman unshare` joins. A mount made anywhere else is invisible to the
// containers. internal/adapter/userns runs commands there (joining the pause
// process with nsenter when it can, else through Unshare); the adapters of
// those commands are internal/adapter/netns and internal/overlayfs.

// Unshare is `podman unshare COMMAND`: argv run as uid 0 of the rootless
// user namespace, in podman's mount namespace (podman starts its pause
// process when none runs); its stdout. Its caller is internal/adapter/userns,
// which builds no argv of its own: the command is that of the adapter
// that owns the program.
func (c *Client) Unshare(ctx context.Context, argv ...string) ([]byte, error) {
	return c.podmanUnshare(ctx, argv...)
}

func (c *Client) podmanUnshare(ctx context.Context, argv ...string) ([]byte, error) {
	return c.outputArgs(ctx, append([]string{"unshare"}, argv...)...)
}

// PauseProcess returns the pid of rootless podman's pause process when its
// pid file names a live catatonit of this user in a user namespace other
// than ours; a stale or recycled pid is never joined.
func (c *Client) PauseProcess() (int, bool) {
	if os.Getuid() == 0 {
		return 0, false // rootful podman has no pause process
	}
	rt := c.getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(rt, "libpod", "tmp", "pause.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, false
	}
	proc := "/proc/" + strconv.Itoa(pid)
	comm, err := os.ReadFile(proc + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "catatonit" {
		return 0, false
	}
	var st os.FileInfo
	if st, err = os.Stat(proc); err != nil || !ownedByUs(st) {
		return 0, false
	}
	theirs, err1 := os.Readlink(proc + "/ns/user")
	ours, err2 := os.Readlink("/proc/self/ns/user")
	if err1 != nil || err2 != nil || theirs == ours {
		return 0, false
	}
	return pid, true
}

func (c *Client) getenv(key string) string {
	if c.Env == nil {
		return os.Getenv(key)
	}
	v := ""
	for _, kv := range c.Env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// ImageMount mounts image (a name or ID) read-only through podman's storage
// and returns the mount point, which is valid only inside `podman unshare`.
// Podman counts image mounts; each ImageMount needs one ImageUnmount.
func (c *Client) ImageMount(ctx context.Context, image string) (string, error) {
	if image == "" || strings.HasPrefix(image, "-") {
		return "", fmt.Errorf("image mount: bad image reference %q", image)
	}
	// podman itself must run under `podman unshare`: joined by nsenter it
	// would take itself for rootful podman.
	out, err := c.podmanUnshare(ctx, c.bin(), "image", "mount", image)
	if dir, ok := missingMountPoint(err); ok {
		// containers/storage still counts a mount of the layer whose
		// mount point is gone, and stops at its lstat. It happens when the
		// count outlived the mount (a killed podman, a new pause process)
		// and the overlay driver's own unmount then removed the dir (a
		// `podman build` on top of the image does). With the dir back,
		// storage sees the layer unmounted and mounts it again.
		c.logger().Warn("podman's storage counts a mount whose mount point is gone; recreating it", "image", image, "dir", dir)
		if mkErr := os.Mkdir(dir, 0o700); mkErr != nil && !errors.Is(mkErr, os.ErrExist) {
			return "", fmt.Errorf("%w (recreating the mount point: %v)", err, mkErr)
		}
		out, err = c.podmanUnshare(ctx, c.bin(), "image", "mount", image)
	}
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" || !strings.HasPrefix(dir, "/") || strings.ContainsAny(dir, "\n\x00") {
		return "", fmt.Errorf("podman image mount %s: unexpected output %q", image, out)
	}
	return dir, nil
}

// missingMountPoint recognises podman's failure on a layer it counts as
// mounted whose mount point no longer exists ("lstat <layer>/merged: no
// such file or directory") and returns that mount point. Only a "merged"
// directory beside the layer's "diff" is ever returned.
func missingMountPoint(err error) (string, bool) {
	var pe *Error
	if !errors.As(err, &pe) {
		return "", false
	}
	msg := strings.TrimPrefix(execx.LastLine(pe.Stderr), "Error: ")
	dir, ok := strings.CutPrefix(msg, "lstat ")
	if !ok {
		return "", false
	}
	dir, ok = strings.CutSuffix(dir, ": no such file or directory")
	if !ok || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || filepath.Base(dir) != "merged" {
		return "", false
	}
	if fi, err := os.Lstat(filepath.Join(filepath.Dir(dir), "diff")); err != nil || !fi.IsDir() {
		return "", false
	}
	return dir, true
}

// ImageUnmount releases one ImageMount of image.
func (c *Client) ImageUnmount(ctx context.Context, image string) error {
	if image == "" || strings.HasPrefix(image, "-") {
		return fmt.Errorf("image unmount: bad image reference %q", image)
	}
	_, err := c.podmanUnshare(ctx, c.bin(), "image", "unmount", image)
	return err
}
