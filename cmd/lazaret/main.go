// Command lazaret runs untrusted coding agents in rootless gVisor sandboxes.
// Re-executed as `lazaret __coordinator` it is a domain's coordinator, and
// as `lazaret __stateanchor-fold` a State Anchor fold in podman's user
// namespace; the runsc runtime shim podman runs is its own binary,
// cmd/lazaret-runsc.
package main

import (
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/cli"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/statestore"
)

func main() {
	// Descriptors inherited from a terminal or IDE must reach no child:
	// the CLI's podman, git…, and, in the __coordinator process, the
	// agent's approved host commands.
	if err := fdsafe.MarkInherited(); err != nil {
		fmt.Fprintln(os.Stderr, "lazaret:", err)
		os.Exit(1)
	}
	// A State Anchor fold, as root of podman's user namespace (the CLI's
	// and the coordinator's statestore.FoldInNamespace start it).
	if len(os.Args) > 1 && os.Args[1] == statestore.FoldVerb {
		os.Exit(statestore.FoldMain(os.Args[2:]))
	}
	os.Exit(cli.Main(os.Args, runCoordinator))
}
