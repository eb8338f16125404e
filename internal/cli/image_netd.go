package cli

import (
	"context"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/cli/image"
	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
)

// buildNetdImage builds the network sidecar image (FROM scratch with the
// lazaret-netd installed beside lazaret), tagged with that binary's hash:
// an existing image of the same tag holds the same binary and is kept.
func buildNetdImage(ctx context.Context, g *globalOptions, b *image.Builder) error {
	ref, bin, err := netdimage.InstalledImageRef()
	if err != nil {
		return withHint(err, exitSetup, "build it with `make build` (or set LAZARET_NETD)")
	}
	if !b.Force {
		if ok, err := b.Podman.ImageExists(ctx, ref); err == nil && ok {
			fmt.Fprintf(b.Progress, "==> %s is up to date\n", ref)
			return nil
		}
	}
	fmt.Fprintf(b.Progress, "==> building %s from %s\n", ref, bin)
	if err := netdimage.BuildImage(ctx, b.Podman, bin, ref); err != nil {
		return err
	}
	netdimage.PruneImages(ctx, b.Podman, ref)
	return nil
}

// netdImageRef is the sidecar image the installed lazaret-netd runs in
// (this version's tag when none is installed).
func netdImageRef() string {
	if ref, _, err := netdimage.InstalledImageRef(); err == nil {
		return ref
	}
	return netdimage.ImageRef()
}
