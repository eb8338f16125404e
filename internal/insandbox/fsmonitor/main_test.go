package fsmonitor

import (
	"os"
	"testing"
)

// hookEnv makes the test binary act as the hook (git runs it as
// core.fsmonitor in the conformance test).
const hookEnv = "LAZARET_FSMONITOR_TEST_HOOK"

func TestMain(m *testing.M) {
	if os.Getenv(hookEnv) == "1" {
		os.Exit(Hook(os.Args[1:], os.Getenv("LAZARET_FSMONITOR_SOCKET"), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
