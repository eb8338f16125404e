//go:build integration

package integration

import (
	"strings"
	"testing"
)

// TestHints: through the real CLI and sandbox, the messages point the
// right way (issue 40 items 5 and 8). An escalation from `lazaret exec`
// without -t is denied at once saying there is no terminal to ask, never
// announcing a wait on the lazaret terminal; `net status` with nothing
// running shows the configured policy; `net allow` of an over-broad CIDR
// is refused without --yes and names the network it would open.
func TestHints(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("[network]\nallow_egress = [\"140.82.112.0/20\"]\n")
	r := e.Run("net", "status")
	if r.Code != 0 || !strings.Contains(r.Stdout, "not running") || !strings.Contains(r.Stdout, "140.82.112.0/20") {
		t.Fatalf("net status, nothing running: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = e.Run("exec", "--", "sh", "-c", "lazaret-escalate -- printf x; echo rc=$?")
	if r.Code != 0 || !strings.Contains(r.Stdout, "rc=126") || strings.Contains(r.Stderr, "waiting for approval") ||
		!strings.Contains(r.Stderr, "no terminal to ask") {
		t.Fatalf("escalation without a terminal: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	r = e.Run("net", "allow", "8.8.8.8/0")
	if r.Code != 2 || !strings.Contains(r.Stderr, "0.0.0.0/0 allows every IPv4 destination") || !strings.Contains(r.Stderr, "--yes 0.0.0.0/0") {
		t.Fatalf("net allow 8.8.8.8/0: exit %d\n%s", r.Code, r.Stderr)
	}
}
