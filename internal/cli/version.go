package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/version"
)

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print lazaret's version and the pinned runsc",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(g.io.Out, "lazaret %s (%s, %s/%s)\nrunsc pin gvisor.dev/gvisor/runsc@%s\ncontrol API %d\n",
				version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, version.RunscVersion, version.APIVersion)
			return nil
		},
	}
}
