package podman

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/execx"
)

// ImageInfo is the part of `podman image inspect` lazaret uses.
type ImageInfo struct {
	ID     string            `json:"Id"`
	Digest string            `json:"Digest"`
	Labels map[string]string `json:"Labels"`
	Size   int64             `json:"Size"`
	// GraphDriver is where the image's layers are in podman's storage.
	GraphDriver GraphDriver `json:"GraphDriver"`
}

// GraphDriver names the storage driver and, for overlay, the layer
// directories: UpperDir is the top layer's diff, LowerDir the layers below
// it (colon-separated, empty for a single-layer image).
type GraphDriver struct {
	Name string            `json:"Name"`
	Data map[string]string `json:"Data"`
}

// SingleLayerDir returns the directory holding the image's root filesystem
// when the image is one overlay layer: its content is then exactly what an
// image mount would show (a whiteout in the bottom layer hides nothing).
// ok is false for any other layout, which needs a real image mount.
func (i *ImageInfo) SingleLayerDir() (dir string, ok bool) {
	if i.GraphDriver.Name != "overlay" || i.GraphDriver.Data["LowerDir"] != "" {
		return "", false
	}
	dir = i.GraphDriver.Data["UpperDir"]
	if dir == "" || !strings.HasPrefix(dir, "/") || strings.ContainsAny(dir, "\n\x00") {
		return "", false
	}
	return dir, true
}

// ImageExists reports whether ref is in local storage.
func (c *Client) ImageExists(ctx context.Context, ref string) (bool, error) {
	err := c.run(ctx, "image", "exists", ref)
	var pe *Error
	if errors.As(err, &pe) && pe.ExitCode == 1 {
		return false, nil
	}
	return err == nil, err
}

// InspectImage returns the local image ref. A missing image is an error
// wrapping ErrNoSuchImage.
func (c *Client) InspectImage(ctx context.Context, ref string) (*ImageInfo, error) {
	out, err := c.outputArgs(ctx, "image", "inspect", "--format", "json", ref)
	if err != nil {
		return nil, err
	}
	return decodeImageInspect(out, ref)
}

func decodeImageInspect(out []byte, ref string) (*ImageInfo, error) {
	var infos []ImageInfo
	if err := json.Unmarshal(out, &infos); err != nil {
		return nil, fmt.Errorf("podman image inspect %s: decoding: %w", ref, err)
	}
	if len(infos) != 1 {
		return nil, fmt.Errorf("podman image inspect %s: %d results: %w", ref, len(infos), ErrNoSuchImage)
	}
	return &infos[0], nil
}

// ImportImage imports a root filesystem tarball as image ref, applying
// Containerfile instructions in changes (CMD, ENV, LABEL, …).
func (c *Client) ImportImage(ctx context.Context, tarball, ref string, changes []string) error {
	args := []string{"import", "--quiet"}
	for _, ch := range changes {
		args = append(args, "--change", ch)
	}
	args = append(args, tarball, ref)
	return c.run(ctx, args...)
}

// RemoveImage removes ref; a missing image is not an error.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	err := c.run(ctx, "image", "rm", "--force", ref)
	if errors.Is(err, ErrNoSuchImage) {
		return nil
	}
	return err
}

// Pull pulls ref into local storage. podman's progress goes to progress:
// a terminal gets it directly (podman draws progress bars only on a
// terminal), anything else gets the lines and the error is kept for the
// returned *Error.
func (c *Client) Pull(ctx context.Context, ref string, progress io.Writer) error {
	args := []string{"pull", "--", ref}
	cmd := c.command(ctx, args...)
	var stderr execx.TailBuffer
	if f, ok := progress.(interface{ Fd() uintptr }); ok && isTerminal(f.Fd()) {
		cmd.Stderr = progress
	} else {
		cmd.Stderr = io.MultiWriter(progress, &stderr)
	}
	// stdout is the pulled image's ID, of no use to the user.
	return c.wrap(args, cmd.Run(), stderr.String())
}
