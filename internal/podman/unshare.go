package podman

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Rootless podman keeps its mounts (image mounts, container root
// filesystems) in the user and mount namespace of its pause process, which
// `podman unshare` joins. A mount made anywhere else is invisible to the
// containers. These helpers run commands there.

// Unshare runs argv inside `podman unshare` (uid 0 of the rootless user
// namespace, podman's mount namespace) and returns its stdout. Only
// stdin/stdout/stderr reach argv; podman itself may add descriptors of its
// own (it passes a pipe at fd 251), so argv that daemonizes must close
// them.
func (c *Client) Unshare(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("podman unshare: no command")
	}
	return c.Output(ctx, append([]string{"unshare"}, argv...)...)
}

// ImageMount mounts image (a name or ID) read-only through podman's storage
// and returns the mount point, which is valid only inside `podman unshare`.
// Podman counts image mounts; each ImageMount needs one ImageUnmount.
func (c *Client) ImageMount(ctx context.Context, image string) (string, error) {
	if image == "" || strings.HasPrefix(image, "-") {
		return "", fmt.Errorf("image mount: bad image reference %q", image)
	}
	out, err := c.Unshare(ctx, c.bin(), "image", "mount", image)
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" || !strings.HasPrefix(dir, "/") || strings.ContainsAny(dir, "\n\x00") {
		return "", fmt.Errorf("podman image mount %s: unexpected output %q", image, out)
	}
	return dir, nil
}

// ImageUnmount releases one ImageMount of image.
func (c *Client) ImageUnmount(ctx context.Context, image string) error {
	if image == "" || strings.HasPrefix(image, "-") {
		return fmt.Errorf("image unmount: bad image reference %q", image)
	}
	_, err := c.Unshare(ctx, c.bin(), "image", "unmount", image)
	return err
}
