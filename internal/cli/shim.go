package cli

import (
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/shim"
)

// Shim runs lazaret as the runsc runtime shim: it returns only when the
// real runsc could not be executed. It has no flags of its own and writes
// its one error to stderr, where podman shows it.
func Shim(args []string) int {
	if err := shim.RunShim(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitSetup
	}
	return exitOK
}
