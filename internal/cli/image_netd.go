package cli

import (
	"context"

	"github.com/lazaret-dev/lazaret/internal/image"
)

// buildNetdImage builds the network sidecar image; it is wired to
// internal/sidecar once that package exists.
func buildNetdImage(ctx context.Context, g *globalOptions, b *image.Builder) error {
	return nil
}

// netdImageRef is the sidecar image of this version.
func netdImageRef() string { return "" }
