package secretfetch

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// counter is a command printing v1, v2, … on each run (its count in file).
func counter(file string) []string {
	return []string{"/bin/sh", "-c", `n=$(cat "$0" 2>/dev/null || echo 0); n=$((n+1)); echo $n >"$0"; echo "v$n"`, file}
}

// TestRefresh: a command source with a period runs again and each new
// value reaches set; a source without one is never run again (the
// control); a failing one is reported by name and does not stop the rest.
func TestRefresh(t *testing.T) {
	dir := t.TempDir()
	sources := []*config.Secret{
		{Name: "fresh", Command: counter(filepath.Join(dir, "fresh")), Refresh: 20 * time.Millisecond},
		{Name: "once", Command: counter(filepath.Join(dir, "once"))},
		{Name: "broken", Command: []string{"/bin/sh", "-c", "exit 3"}, Refresh: 20 * time.Millisecond},
	}
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	got := map[int][]string{}
	failed := map[string]int{}
	enough := make(chan struct{})
	var once sync.Once
	check := func() { // mu held
		if len(got[0]) >= 2 && failed["broken"] > 0 {
			once.Do(func() { close(enough) })
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Refresh(ctx, sources, func(_ context.Context, i int, v string) error {
			mu.Lock()
			defer mu.Unlock()
			got[i] = append(got[i], v)
			check()
			return nil
		}, func(name string, err error) {
			mu.Lock()
			defer mu.Unlock()
			failed[name]++
			check()
		})
	}()
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
		t.Fatal("no refresh within 30 s")
	}
	cancel()
	<-done // Refresh returns once every loop has stopped
	mu.Lock()
	defer mu.Unlock()
	if got[0][0] != "v1" || got[0][1] != "v2" {
		t.Errorf("refreshed values %q, want v1, v2", got[0])
	}
	if len(got[1]) != 0 || len(got[2]) != 0 {
		t.Errorf("set for a source without a period (%q) or a failing one (%q)", got[1], got[2])
	}
}
