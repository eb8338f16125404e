package podman

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/execx"
)

// fakeStoragePodman is a podman that, like containers/storage with a
// leaked mount count, fails `image mount` while the layer's mount point is
// missing and succeeds once it exists.
const fakeStoragePodman = `#!/bin/sh
[ "$1" = unshare ] && { shift; shift; }
[ "$1 $2" = "image mount" ] || { echo "unexpected: $*" >&2; exit 2; }
if [ ! -d "$LAYER/merged" ]; then
	echo "Error: lstat $LAYER/merged: no such file or directory" >&2
	exit 125
fi
echo "$LAYER/merged"
`

func fakeStorageClient(t *testing.T, layer string) *Client {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "podman")
	if err := os.WriteFile(bin, []byte(fakeStoragePodman), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Client{Bin: bin, Env: append(os.Environ(), "LAYER="+layer)}
}

func TestImageMountRecreatesAMissingMountPoint(t *testing.T) {
	layer := filepath.Join(t.TempDir(), "overlay", "d63751a4")
	if err := os.MkdirAll(filepath.Join(layer, "diff"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := fakeStorageClient(t, layer)
	// Positive control: the fake fails as podman does.
	if _, err := c.outputArgs(context.Background(), "image", "mount", "img"); err == nil || !strings.Contains(err.Error(), "lstat") {
		t.Fatalf("control: image mount without the mount point: %v, want the lstat error", err)
	}
	dir, err := c.ImageMount(context.Background(), "img")
	if err != nil {
		t.Fatalf("ImageMount: %v", err)
	}
	if want := filepath.Join(layer, "merged"); dir != want {
		t.Errorf("ImageMount = %q, want %q", dir, want)
	}
}

// Only a "merged" dir beside a layer's "diff" is ever created: the error
// text is podman's, not a licence to make arbitrary directories.
func TestImageMountCreatesNothingOutsideALayer(t *testing.T) {
	notLayer := filepath.Join(t.TempDir(), "somewhere")
	if err := os.MkdirAll(notLayer, 0o755); err != nil {
		t.Fatal(err)
	}
	c := fakeStorageClient(t, notLayer)
	if _, err := c.ImageMount(context.Background(), "img"); err == nil || !strings.Contains(err.Error(), "lstat") {
		t.Fatalf("ImageMount outside a layer: %v, want podman's error", err)
	}
	if _, err := os.Stat(filepath.Join(notLayer, "merged")); !os.IsNotExist(err) {
		t.Errorf("merged was created outside a layer: %v", err)
	}
}

func TestMissingMountPoint(t *testing.T) {
	layer := filepath.Join(t.TempDir(), "l")
	if err := os.MkdirAll(filepath.Join(layer, "diff"), 0o755); err != nil {
		t.Fatal(err)
	}
	for stderr, want := range map[string]bool{
		"Error: lstat " + layer + "/merged: no such file or directory":           true,
		"warn\nError: lstat " + layer + "/merged: no such file or directory\n":   true,
		"Error: lstat " + layer + "/merged: permission denied":                   false,
		"Error: lstat " + layer + "/diff: no such file or directory":             false,
		"Error: lstat " + layer + "/../l/merged: no such file or directory":      false,
		"Error: lstat relative/merged: no such file or directory":                false,
		"Error: stat " + layer + "/merged: no such file or directory":            false,
		"Error: lstat " + layer + "/merged: no such file or directory: and more": false,
	} {
		_, got := missingMountPoint(&Error{execx.Failure{Args: []string{"image"}, ExitCode: 125, Stderr: stderr}})
		if got != want {
			t.Errorf("missingMountPoint(%q) = %v, want %v", stderr, got, want)
		}
	}
}
