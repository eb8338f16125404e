package version

import (
	"os"
	"regexp"
	"testing"
)

// TestRunscPinsAgree: scripts/setup builds the gVisor module that
// tools/runsc/go.mod requires (with the generator built against it), and
// lazaret reports RunscVersion; the two must be the same.
func TestRunscPinsAgree(t *testing.T) {
	mod, err := os.ReadFile("../../tools/runsc/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^require gvisor\.dev/gvisor (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("tools/runsc/go.mod: no `require gvisor.dev/gvisor VERSION` line")
	}
	if got := string(m[1]); got != RunscVersion {
		t.Errorf("tools/runsc/go.mod requires gvisor %s, RunscVersion is %s: change both", got, RunscVersion)
	}
}
