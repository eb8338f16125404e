// Command lazaret-kube is lazaret's Kubernetes backend: `lazaret --backend
// kubernetes VERB` (or LAZARET_BACKEND=kubernetes) execs it. A binary of
// its own so that client-go never links into lazaret, which is also the
// runsc shim and whose start time counts.
package main

import (
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/clicore/keeper"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/kubecli"
)

func main() {
	// Descriptors inherited from a terminal or IDE reach no child.
	if err := fdsafe.MarkInherited(); err != nil {
		fmt.Fprintln(os.Stderr, "lazaret:", err)
		os.Exit(1)
	}
	// A kept session's keeper (`shell` on a terminal, --detach) is a
	// small process of its own: no command tree, no configuration.
	if len(os.Args) > 1 && os.Args[1] == keeper.Verb {
		os.Exit(keeper.Main(os.Args[2:]))
	}
	os.Exit(kubecli.Main(os.Args))
}
