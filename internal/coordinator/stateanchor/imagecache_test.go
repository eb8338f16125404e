package stateanchor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
)

// fakeInspect is a podman whose `image inspect` answers a single-layer
// image in store and counts its calls in store/calls.
func fakeInspect(t *testing.T, store string) string {
	t.Helper()
	for _, d := range []string{"overlay/L1/diff", "overlay-images"} {
		if err := os.MkdirAll(filepath.Join(store, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeIndex(t, store, "v1")
	out := `[{"Id":"` + strings.Repeat("1", 64) + `","GraphDriver":{"Name":"overlay","Data":{"UpperDir":"` + store + `/overlay/L1/diff"}}}]`
	script := "#!/bin/sh\necho x >> " + store + "/calls\ncat <<'EOF'\n" + out + "\nEOF\n"
	p := filepath.Join(t.TempDir(), "podman")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeIndex replaces the image index the way containers/storage does (a
// new file renamed over the old).
func writeIndex(t *testing.T, store, content string) {
	t.Helper()
	tmp := filepath.Join(store, "overlay-images", ".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(store, "overlay-images", "images.json")); err != nil {
		t.Fatal(err)
	}
}

func calls(t *testing.T, store string) int {
	b, _ := os.ReadFile(filepath.Join(store, "calls"))
	return strings.Count(string(b), "x")
}

// TestImageInspectCache: the inspect is taken from the cache only while
// podman's image index is unchanged since before the cached inspect ran;
// a changed index (an image built, removed or tagged) or another
// reference makes podman inspect again (the control that the cache is
// not used blindly).
func TestImageInspectCache(t *testing.T) {
	store := t.TempDir()
	c := New(Options{Image: "localhost/img", Podman: &podman.Client{Bin: fakeInspect(t, store)}})
	c.root = filepath.Join(t.TempDir(), "overlay")
	inspect := func() *podman.ImageInfo {
		t.Helper()
		img, err := c.inspectImage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	want := []int{1, 2, 2, 2} // the first start learns the index, the second stamps it
	for i, w := range want {
		img := inspect()
		if got := calls(t, store); got != w {
			t.Fatalf("start %d: %d podman inspects, want %d", i+1, got, w)
		}
		if dir, ok := img.SingleLayerDir(); !ok || dir != store+"/overlay/L1/diff" {
			t.Fatalf("start %d: layer %q", i+1, dir)
		}
	}
	writeIndex(t, store, "v2")
	inspect()
	if got := calls(t, store); got != 3 {
		t.Errorf("after the index changed: %d inspects, want 3", got)
	}
	c.opt.Image = "localhost/other"
	inspect()
	if got := calls(t, store); got != 4 {
		t.Errorf("another reference: %d inspects, want 4", got)
	}
	if err := os.RemoveAll(filepath.Join(store, "overlay", "L1")); err != nil {
		t.Fatal(err)
	}
	inspect()
	inspect()
	if got := calls(t, store); got != 6 {
		t.Errorf("layer dir gone: %d inspects, want 6", got)
	}
}
