//go:build kube

package kube_test

import (
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestBackendStartTimes measures `lazaret --backend kubernetes exec --
// true` in a fresh workspace (a new claim each time): from a warm pool of
// one, and cold (a pool of zero). Logged, not asserted (no timing
// thresholds in tests); run with LAZARET_KUBE_BENCH=1.
func TestBackendStartTimes(t *testing.T) {
	if os.Getenv("LAZARET_KUBE_BENCH") != "1" {
		t.Skip("set LAZARET_KUBE_BENCH=1")
	}
	for _, c := range []struct {
		name string
		pool string
	}{{"cold", "0"}, {"warm", "1"}} {
		e := newBackendEnv(t, "allow_unenforced_egress = true\nwarm_pool = "+c.pool)
		// The first start makes the template and the pool.
		e.mustLazaret(nil, "exec", "e2e", "--", "true")
		e.mustLazaret(nil, "stop", "e2e")
		var times []time.Duration
		for i := 0; i < 5; i++ {
			if c.pool != "0" {
				e.waitPoolReady()
			}
			e.ws = t.TempDir()
			start := time.Now()
			e.mustLazaret(nil, "exec", "e2e", "--", "true")
			times = append(times, time.Since(start))
			e.mustLazaret(nil, "stop", "e2e")
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		t.Logf("%s claim to first command: median %s (of %v)", c.name, times[len(times)/2].Round(10*time.Millisecond), times)
	}
}

// waitPoolReady waits until every warm pool of the namespace has its
// replicas ready (the first start creates the pool).
func (e *backendEnv) waitPoolReady() {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		out := strings.TrimSpace(e.kube("get", "sandboxwarmpools", "-n", e.namespace, "-o", "jsonpath={range .items[*]}{.spec.replicas}/{.status.readyReplicas} {end}"))
		ready := out != ""
		for _, f := range strings.Fields(out) {
			want, got, _ := strings.Cut(f, "/")
			ready = ready && want == got
		}
		if ready {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	e.t.Fatal("warm pool never ready")
}
