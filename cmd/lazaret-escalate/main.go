// Command lazaret-escalate is the Escalation Client that runs inside the
// Agent Sandbox.
package main

import (
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/version"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println("lazaret-escalate", version.Version)
		return
	}
	fmt.Fprintln(os.Stderr, "lazaret-escalate: not implemented yet")
	os.Exit(2)
}
