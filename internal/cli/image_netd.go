package cli

import (
	"context"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/image"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/sidecar"
	"github.com/lazaret-dev/lazaret/internal/version"
)

// buildNetdImage builds the network sidecar image (FROM scratch with the
// lazaret-netd installed beside lazaret). A released version's image is
// kept when present; a "dev" build is always rebuilt, its binary changes.
func buildNetdImage(ctx context.Context, g *globalOptions, b *image.Builder) error {
	ref := sidecar.ImageRef()
	if !b.Force && version.Version != "dev" {
		if ok, err := sidecar.ImageExists(ctx, b.Podman, ref); err == nil && ok {
			fmt.Fprintf(b.Progress, "==> %s is up to date\n", ref)
			return nil
		}
	}
	bin, err := locate.Find(locate.Netd)
	if err != nil {
		return withHint(err, exitSetup, "build it with `make build` (or set LAZARET_NETD)")
	}
	fmt.Fprintf(b.Progress, "==> building %s from %s\n", ref, bin)
	return sidecar.BuildImage(ctx, b.Podman, bin, ref)
}

// netdImageRef is the sidecar image of this version.
func netdImageRef() string { return sidecar.ImageRef() }
