//go:build integration

package integration

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestProfileLayersConcurrent: two workspaces of one profile (persist =
// "profile", the default) run at once, each on a layer of its own over
// the profile's layer: a file one writes under /usr is not visible in the
// other while both run; after both ended a third workspace's sandbox has
// it (the layer was fast-forwarded into the profile's). The version before
// layered State Anchors refused the second start ("the profile's State
// Anchor is in use").
func TestProfileLayersConcurrent(t *testing.T) {
	e := NewEnv(t)
	b := arSecond(t, e, "ws-b")
	c := arSecond(t, e, "ws-c")

	hold, release := io.Pipe()
	holder, _ := background(t, e, hold, "exec", "--", "cat")
	t.Cleanup(func() { release.Close() })
	Eventually(t, 90*time.Second, "first sandbox running", func() bool { return arRunning(t, e, "default") })

	holdB, releaseB := io.Pipe()
	holderB, errB := background(t, b, holdB, "exec", "--", "cat")
	t.Cleanup(func() { releaseB.Close() })
	Eventually(t, 90*time.Second, "second sandbox of the profile running", func() bool {
		if holderB.ProcessState != nil {
			t.Fatalf("second sandbox of the profile refused: %s", errB.String())
		}
		return arRunning(t, b, "default")
	})

	e.MustRun("exec", "--", "sh", "-c", `printf '#!/bin/sh\necho lz-layer-tool ok\n' > /usr/local/bin/lz-layer-tool && chmod 755 /usr/local/bin/lz-layer-tool`)
	if r := b.Run("exec", "--", "test", "-e", "/usr/local/bin/lz-layer-tool"); r.Code != 1 {
		t.Fatalf("the other running sandbox sees the first one's /usr write: exit %d %s", r.Code, r.Stderr)
	}
	b.MustRun("exec", "--", "touch", "/tmp/not-persistent")

	release.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	e.MustRun("stop")
	releaseB.Close()
	if err := holderB.Wait(); err != nil {
		t.Fatalf("holder b: %v", err)
	}
	b.MustRun("stop")

	if out := c.MustRun("exec", "--", "lz-layer-tool"); out != "lz-layer-tool ok\n" {
		t.Fatalf("third workspace after both ended: %q", out)
	}
	c.MustRun("stop")
	if st := c.MustRun("state"); strings.Contains(st, "pending") {
		t.Errorf("a layer stayed pending after a fast-forward:\n%s", st)
	}
}

// TestProfileLayersBackToBack: `lazaret exec -- true` in five new
// workspaces of one profile, each started as soon as the previous one
// returned (its sandbox still tearing down), all start. The version
// before layered State Anchors refused 3 or 4 of them.
func TestProfileLayersBackToBack(t *testing.T) {
	e := NewEnv(t)
	var envs []*Env
	for i := range 5 {
		w := arSecond(t, e, fmt.Sprintf("ws-%d", i))
		envs = append(envs, w)
		if r := w.Run("exec", "--", "true"); r.Code != 0 {
			t.Errorf("exec %d of 5 in a new workspace: exit %d: %s", i+1, r.Code, r.Stderr)
		}
	}
	for _, w := range envs {
		w.Run("stop")
	}
}
