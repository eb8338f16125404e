package cli

import (
	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/image"
	"github.com/lazaret-dev/lazaret/internal/podman"
)

type imageBuildOptions struct {
	force bool
}

func newImageCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage lazaret's locally built images",
	}
	o := &imageBuildOptions{}
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the default agent image and the network sidecar image (offline from registries)",
		Long: `Builds localhost/lazaret-default (Debian minbase + git + ca-certificates, made with
mmdebstrap from Debian packages, no container registry) and the network sidecar image
(FROM scratch with lazaret-netd). Images already built from the same recipe are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runImageBuild(cmd, g, o)
		},
	}
	build.Flags().BoolVar(&o.force, "force", false, "rebuild even when the images are up to date")
	cmd.AddCommand(build)
	return cmd
}

func runImageBuild(cmd *cobra.Command, g *globalOptions, o *imageBuildOptions) error {
	if err := g.refuseRoot(); err != nil {
		return err
	}
	b := &image.Builder{Podman: &podman.Client{Log: g.log}, Progress: g.io.ErrOut, Force: o.force}
	if err := b.BuildDefault(cmd.Context()); err != nil {
		return err
	}
	return buildNetdImage(cmd.Context(), g, b)
}
