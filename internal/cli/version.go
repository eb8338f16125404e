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
			fmt.Fprint(g.io.Out, versionText())
			return nil
		},
	}
}

// versionText is what `lazaret version` and `lazaret --version` print.
func versionText() string {
	return fmt.Sprintf("lazaret %s (%s, %s/%s)\nrunsc pin gvisor.dev/gvisor/runsc@%s\ncontrol API %d\n",
		version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, version.RunscVersion, version.APIVersion)
}

// setVersionFlag makes `lazaret --version` answer as `lazaret version`
// does (cobra's flag; -v stays --verbose).
func setVersionFlag(root *cobra.Command) {
	root.Version = version.Version
	// A template: braces in the text would be actions (there are none).
	root.SetVersionTemplate(versionText())
}
