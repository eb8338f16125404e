package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/cli/image"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

type imageBuildOptions struct {
	force bool
}

func newImageCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build lazaret's local images, pull a profile's image",
	}
	o := &imageBuildOptions{}
	build := &cobra.Command{
		Use:   "build [default|agent]",
		Short: "Build the default agent image and the network sidecar image, or the agent-ready image (offline from registries)",
		Long: `Without an argument, builds localhost/lazaret-default (Debian minbase + git +
ca-certificates, made with mmdebstrap from Debian packages, no container registry) and the
network sidecar image (FROM scratch with lazaret-netd).

"lazaret image build agent" builds ` + image.AgentImage + `: Debian ` + image.AgentSuite + ` minbase + git,
ca-certificates, curl, procps and Node.js (>= 22) with npm, all from Debian packages (several
minutes). Use it with a profile: [profiles.claude] image = "` + image.AgentImage + `".

Images already built from the same recipe are kept.`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: image.Names(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImageBuild(cmd, g, o, args)
		},
	}
	build.Flags().BoolVar(&o.force, "force", false, "rebuild even when the images are up to date")
	pull := &cobra.Command{
		Use:   "pull [PROFILE]",
		Short: "Pull a profile's image from its registry (podman pull), with progress",
		Long: `Pulls the image of PROFILE (default: "default") into the local storage with
podman pull. lazaret also pulls a missing pinned image (a tag other than latest, or a digest)
when a sandbox starts. Images under localhost/ are built here and cannot be pulled.`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
			return g.completeProfiles(cmd, args, s)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := config.DefaultProfileName
			if len(args) == 1 {
				name = args[0]
			}
			return runImagePull(cmd.Context(), g, name)
		},
	}
	cmd.AddCommand(build, pull)
	return cmd
}

func runImageBuild(cmd *cobra.Command, g *globalOptions, o *imageBuildOptions, args []string) error {
	if err := g.refuseRoot(); err != nil {
		return err
	}
	b := &image.Builder{Podman: g.podmanClient(), Progress: g.io.ErrOut, Force: o.force}
	if len(args) == 1 {
		if !slices.Contains(image.Names(), args[0]) {
			return usageError{fmt.Errorf("no image recipe %q (known: %s)", args[0], strings.Join(image.Names(), ", "))}
		}
		return b.Build(cmd.Context(), args[0])
	}
	if err := b.BuildDefault(cmd.Context()); err != nil {
		return err
	}
	return buildNetdImage(cmd.Context(), g, b)
}

func runImagePull(ctx context.Context, g *globalOptions, name string) error {
	if err := g.refuseRoot(); err != nil {
		return err
	}
	if err := config.ValidProfileName(name); err != nil {
		return usageError{err}
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	p, err := cfg.Profile(name)
	if err != nil {
		return withHint(err, exitUsage, "pick a profile listed above")
	}
	if _, err := image.Ensure(ctx, g.podmanClient(), p, g.io.ErrOut, true); err != nil {
		return imageError(err)
	}
	return nil
}

// imageError gives an unavailable image its exit code; its message already
// says what to do.
func imageError(err error) error {
	if errors.Is(err, image.ErrUnavailable) {
		return withHint(err, exitSetup, "")
	}
	return err
}

// startWithImage runs start (which starts or reaches the sandbox). When the
// sandbox could not start because the profile's image is missing, a
// pinned image is pulled (progress on stderr) and start runs once more;
// otherwise the error says in one line what to run. Nothing is checked
// before the first attempt: a start with the image present costs no extra
// podman call.
func (g *globalOptions) startWithImage(ctx context.Context, p *config.Profile, start func() error) error {
	err := start()
	if err == nil || !errors.Is(err, podman.ErrNoSuchImage) {
		return err
	}
	pulled, perr := image.Ensure(ctx, g.podmanClient(), p, g.io.ErrOut, false)
	if perr != nil {
		return imageError(perr)
	}
	if !pulled {
		return err // the image is there now: the failure was another one's
	}
	// The coordinator that failed answers with its error until it has
	// torn down (a few seconds at most): retry while it does.
	for range 50 {
		if err = start(); err == nil || !errors.Is(err, podman.ErrNoSuchImage) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return err
}
