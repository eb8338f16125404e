// Command lazaret runs untrusted coding agents in rootless gVisor sandboxes.
// Invoked through a link named lazaret-runsc, it is the runsc runtime shim
// that podman runs (DESIGN §5).
package main

import (
	"os"
	"path/filepath"

	"github.com/lazaret-dev/lazaret/internal/cli"
	"github.com/lazaret-dev/lazaret/internal/sandbox"
)

func main() {
	if filepath.Base(os.Args[0]) == sandbox.ShimName {
		os.Exit(cli.Shim(os.Args))
	}
	os.Exit(cli.Main(os.Args))
}
