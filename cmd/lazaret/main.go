// Command lazaret runs untrusted coding agents in rootless gVisor sandboxes.
package main

import (
	"os"

	"github.com/lazaret-dev/lazaret/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args)) }
