package cli

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/shim"
)

func TestVerbLine(t *testing.T) {
	for _, tc := range [][3]string{{"stop", "", "`lazaret stop`"}, {"stop", "default", "`lazaret stop`"}, {"shell", "claude", "`lazaret shell claude`"}} {
		if got := verbLine(tc[0], tc[1]); got != tc[2] {
			t.Errorf("verbLine(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

// TestShimExitIsSetup: the shim, which cannot link the CLI, exits with the
// CLI's "environment not ready" code.
func TestShimExitIsSetup(t *testing.T) {
	if shim.ExitSetup != exitSetup {
		t.Fatalf("shim exits %d, the CLI's setup code is %d", shim.ExitSetup, exitSetup)
	}
}
