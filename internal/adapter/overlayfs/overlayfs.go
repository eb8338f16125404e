// Package overlayfs is the adapter of the State Anchor's file work as uid 0
// of rootless podman's user namespace, in podman's mount namespace
// (internal/adapter/userns), where the image mount and the sandbox's sub-uids'
// files are: mounting an overlay (kernel overlayfs, or fuse-overlayfs),
// unmounting, removing and measuring. Each is a typed method; the programs
// (bash, mount, umount, fuse-overlayfs, rm, du) and their argv are built
// here only.
package overlayfs

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/adapter/userns"
)

// Overlay drivers.
const (
	DriverAuto    = "auto"
	DriverOverlay = "overlay"        // kernel overlayfs in the user namespace
	DriverFuse    = "fuse-overlayfs" // FUSE daemon
)

// Client works in the namespaces of one podman user.
type Client struct{ ns userns.Runner }

// New is the Client of pc's podman.
func New(pc *podman.Client) *Client { return &Client{ns: userns.New(pc)} }

// Overlay is one overlay to mount (mountScript).
type Overlay struct {
	// Image is the image's root (its mount point, or its single layer);
	// Dir the container dir (/usr) whose copy in the image is the lowest
	// layer; Empty an empty dir for a Dir the image does not have.
	Image, Dir, Empty string
	// Upper (the changes), Work and Merged (the mount point).
	Upper, Work, Merged string
	// NewUpper: Upper was just created, and takes the image dir's owner
	// and mode.
	NewUpper bool
	// FuseOverlayfs is the fuse-overlayfs executable; Log the file for its
	// stderr.
	FuseOverlayfs, Log string
	// Driver is DriverOverlay, DriverFuse or DriverAuto (overlay, falling
	// back to fuse-overlayfs where the kernel refuses an unprivileged one).
	Driver string
	// Lowers are the lower dirs above the image's, topmost first,
	// ':'-separated, or empty.
	Lowers string
}

// Mount mounts o and returns what the mount printed: the driver it used,
// on a line.
func (c *Client) Mount(ctx context.Context, o Overlay) (string, error) {
	upper := "old"
	if o.NewUpper {
		upper = "new"
	}
	out, err := c.ns.Run(ctx, "bash", "-c", mountScript, "stateanchor-mount",
		o.Image, o.Dir, o.Empty, o.Upper, o.Work, o.Merged, o.FuseOverlayfs, upper, o.Log, o.Driver, o.Lowers)
	return string(out), err
}

// Unmount unmounts each of targets: cleanly when nothing uses it, lazily
// otherwise (unmountScript). Every target is tried; the error says one
// failed.
func (c *Client) Unmount(ctx context.Context, targets ...string) error {
	_, err := c.ns.Run(ctx, append([]string{"bash", "-c", unmountScript, "stateanchor-unmount"}, targets...)...)
	return err
}

// RemoveAll removes each of paths and everything below it (`rm -rf`, which
// follows no symlink), whoever of the namespace's users owns it.
func (c *Client) RemoveAll(ctx context.Context, paths ...string) error {
	_, err := c.ns.Run(ctx, append([]string{"rm", "-rf", "--"}, paths...)...)
	return err
}

// Remove removes each of paths, a file (`rm -f`: a missing one is no
// error).
func (c *Client) Remove(ctx context.Context, paths ...string) error {
	_, err := c.ns.Run(ctx, append([]string{"rm", "-f", "--"}, paths...)...)
	return err
}

// DiskUsage returns the apparent size in bytes of each of paths and
// everything below it (`du -s -b`); a line du prints that is not a size is
// left out.
func (c *Client) DiskUsage(ctx context.Context, paths ...string) (map[string]int64, error) {
	out, err := c.ns.Run(ctx, append([]string{"du", "-s", "-b", "--"}, paths...)...)
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		n, p, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			continue
		}
		sizes[p] = v
	}
	return sizes, nil
}

// Mountinfo is the mount table of podman's mount namespace
// (/proc/self/mountinfo there).
func (c *Client) Mountinfo(ctx context.Context) ([]byte, error) {
	return c.ns.Mountinfo(ctx)
}
