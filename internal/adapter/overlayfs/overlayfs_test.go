package overlayfs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
)

// fakePodman is a podman that records its argv (NUL-separated) in the file
// it returns and prints out. Being a fake, it is never bypassed by nsenter
// (internal/adapter/userns): every command shows as `podman unshare COMMAND`.
func fakePodman(t *testing.T, out string) (*Client, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "argv")
	bin := filepath.Join(dir, "podman")
	script := "#!/bin/sh\nprintf '%s\\0' \"$@\" > '" + log + "'\nprintf '%s' \"$OUT\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return New(&podman.Client{Bin: bin, Env: []string{"PATH=" + os.Getenv("PATH"), "OUT=" + out}}), log
}

func argv(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

func TestArgv(t *testing.T) {
	ctx := context.Background()
	o := Overlay{Image: "/img", Dir: "/usr", Empty: "/e", Upper: "/u", Work: "/w", Merged: "/m",
		FuseOverlayfs: "fuse-overlayfs", Log: "/l", Driver: DriverAuto, Lowers: "/a:/b"}
	for _, tc := range []struct {
		call func(c *Client) error
		want []string
	}{
		{func(c *Client) error { _, err := c.Mount(ctx, o); return err },
			[]string{"bash", "-c", mountScript, "stateanchor-mount", "/img", "/usr", "/e", "/u", "/w", "/m", "fuse-overlayfs", "old", "/l", "auto", "/a:/b"}},
		{func(c *Client) error {
			o := o
			o.NewUpper, o.Lowers, o.Driver = true, "", DriverFuse
			_, err := c.Mount(ctx, o)
			return err
		}, []string{"bash", "-c", mountScript, "stateanchor-mount", "/img", "/usr", "/e", "/u", "/w", "/m", "fuse-overlayfs", "new", "/l", "fuse-overlayfs", ""}},
		{func(c *Client) error { return c.Unmount(ctx, "/m1", "/m2") },
			[]string{"bash", "-c", unmountScript, "stateanchor-unmount", "/m1", "/m2"}},
		{func(c *Client) error { return c.RemoveAll(ctx, "/c", "/w") }, []string{"rm", "-rf", "--", "/c", "/w"}},
		{func(c *Client) error { return c.Remove(ctx, "/m/hosts") }, []string{"rm", "-f", "--", "/m/hosts"}},
		{func(c *Client) error { _, err := c.DiskUsage(ctx, "/c"); return err }, []string{"du", "-s", "-b", "--", "/c"}},
		{func(c *Client) error { _, err := c.Mountinfo(ctx); return err }, []string{"cat", "/proc/self/mountinfo"}},
	} {
		c, log := fakePodman(t, "")
		if err := tc.call(c); err != nil {
			t.Fatalf("%q: %v", tc.want, err)
		}
		if got, want := argv(t, log), append([]string{"unshare"}, tc.want...); !slices.Equal(got, want) {
			t.Errorf("podman argv\n got %q\nwant %q", got, want)
		}
	}
}

func TestMountReturnsWhatItPrinted(t *testing.T) {
	c, _ := fakePodman(t, "overlay\n")
	if out, err := c.Mount(context.Background(), Overlay{}); err != nil || out != "overlay\n" {
		t.Errorf("Mount = %q, %v", out, err)
	}
}

func TestDiskUsage(t *testing.T) {
	c, _ := fakePodman(t, "123\t/a b\nnot a size\t/x\nno tab\n0\t/c\n")
	got, err := c.DiskUsage(context.Background(), "/a b", "/x", "/c")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["/a b"] != 123 || got["/c"] != 0 {
		t.Errorf("DiskUsage = %v", got)
	}
}
