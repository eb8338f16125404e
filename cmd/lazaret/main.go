// Command lazaret runs untrusted coding agents in rootless gVisor sandboxes.
// Re-executed as `lazaret __coordinator` it is a domain's coordinator,
// dispatched before the CLI's command tree exists (internal/coordinator/entry);
// the runsc runtime shim podman runs is its own binary, cmd/lazaret-runsc.
package main

import (
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/cli"
	"github.com/lazaret-dev/lazaret/internal/clicore/keeper"
	"github.com/lazaret-dev/lazaret/internal/coordinator/entry"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/wire/coordargs"
)

func main() {
	// Descriptors inherited from a terminal or IDE must reach no child:
	// the CLI's podman, git…, and, in the __coordinator process, the
	// agent's approved host commands.
	if err := fdsafe.MarkInherited(); err != nil {
		fmt.Fprintln(os.Stderr, "lazaret:", err)
		os.Exit(1)
	}
	if len(os.Args) > 1 && os.Args[1] == coordargs.Verb {
		os.Exit(entry.Main(os.Args[2:], os.Stderr))
	}
	// A session keeper (`lazaret shell` on a terminal, --detach) is a
	// small process of its own too: no command tree, no configuration.
	if len(os.Args) > 1 && os.Args[1] == keeper.Verb {
		os.Exit(keeper.Main(os.Args[2:]))
	}
	os.Exit(cli.Main(os.Args))
}
