// Command lazaret runs untrusted coding agents in rootless gVisor sandboxes.
// Invoked through a link named lazaret-runsc, it is the runsc runtime shim
// that podman runs (DESIGN §5).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lazaret-dev/lazaret/internal/cli"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/shim"
)

func main() {
	if filepath.Base(os.Args[0]) == shim.ShimName {
		// Not here: conmon hands runsc descriptors it must inherit
		// (--preserve-fds), and the shim only execs runsc.
		os.Exit(shim.Main(os.Args))
	}
	// Descriptors inherited from a terminal or IDE must reach no child:
	// the CLI's podman, git…, and, in the __coordinator process, the
	// agent's approved host commands.
	if err := fdsafe.MarkInherited(); err != nil {
		fmt.Fprintln(os.Stderr, "lazaret:", err)
		os.Exit(1)
	}
	os.Exit(cli.Main(os.Args, runCoordinator))
}
