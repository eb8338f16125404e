// Command lazaret-runsc is the runsc runtime shim podman runs for
// lazaret's agent containers (internal/shim): it adds lazaret's runsc
// flags, holds `create` at the start gate and execs the pinned runsc. A
// binary of its own, not the lazaret binary under another name: podman
// starts it for every runtime call, two of them on a start's critical
// path, and the CLI's start (its packages and their init) cost about 10 ms
// more per call on a small machine (docs/PERFORMANCE.md).
package main

import (
	"os"

	"github.com/lazaret-dev/lazaret/internal/shim"
)

func main() {
	// Nothing else first: conmon hands runsc descriptors it must inherit
	// (--preserve-fds), and the shim only execs runsc.
	os.Exit(shim.Main(os.Args))
}
