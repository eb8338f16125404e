// Command lazaret-netd is the Network Sidecar that owns the sandbox network
// namespace.
package main

import (
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/version"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println("lazaret-netd", version.Version)
		return
	}
	fmt.Fprintln(os.Stderr, "lazaret-netd: not implemented yet")
	os.Exit(2)
}
