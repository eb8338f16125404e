package netns

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
	// XDG_RUNTIME_DIR without podman's pause pid file: no pause process.
	env := []string{"PATH=" + os.Getenv("PATH"), "OUT=" + out, "XDG_RUNTIME_DIR=" + dir}
	return New(&podman.Client{Bin: bin, Env: env}), log
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
	for _, tc := range []struct {
		call func(c *Client) error
		want []string
	}{
		{func(c *Client) error { return c.Create(ctx, "/run/n") }, []string{"sh", "-c", netnsCreateScript, "netns-create", "/run/n"}},
		{func(c *Client) error { return c.Remove(ctx, "/run/n") }, []string{"sh", "-c", netnsRemoveScript, "netns-remove", "/run/n"}},
		{func(c *Client) error { _, err := c.Pinned(ctx, "/run/n"); return err }, []string{"stat", "-f", "-c", "%T", "--", "/run/n"}},
		{func(c *Client) error { _, err := c.Cut(ctx, "/run/n"); return err }, []string{"nsenter", "--net=/run/n", "sh", "-c", cutScript}},
	} {
		c, log := fakePodman(t, "")
		if err := tc.call(c); err != nil {
			t.Fatalf("%q: %v", tc.want, err)
		}
		if got, want := argv(t, log), append([]string{"unshare"}, tc.want...); !slices.Equal(got, want) {
			t.Errorf("podman argv\n got %q\nwant %q", got, want)
		}
	}
	if err := New(&podman.Client{}).Create(ctx, "rel"); err == nil {
		t.Error("Create of a relative path: no error")
	}
}

func TestPinned(t *testing.T) {
	for out, want := range map[string]bool{"nsfs\n": true, "tmpfs\n": false} {
		c, _ := fakePodman(t, out)
		if got, err := c.Pinned(context.Background(), "/run/n"); err != nil || got != want {
			t.Errorf("Pinned with stat printing %q = %v, %v", out, got, err)
		}
	}
}

func TestUplink(t *testing.T) {
	want := []string{"slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox", "--enable-seccomp",
		"--ready-fd=3", "--exit-fd=4", "--enable-ipv6", "--netns-type=path", "/run/n", "tap0"}
	if got := uplinkArgv("/run/n", UplinkOptions{IPv6: true}); !slices.Equal(got, want) {
		t.Errorf("uplinkArgv\n got %q\nwant %q", got, want)
	}
	c, _ := fakePodman(t, "")
	if _, err := c.StartUplink(context.Background(), "/run/n", UplinkOptions{}); err == nil || err.Error() != "uplink: podman's pause process is not running" {
		t.Errorf("StartUplink without a pause process: %v", err)
	}
}

func TestReserve(t *testing.T) {
	p := filepath.Join(t.TempDir(), "n")
	if err := Reserve(p); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("reserved %s: %v, %v", p, fi, err)
	}
	if err := Reserve("rel"); err == nil {
		t.Error("Reserve of a relative path: no error")
	}
}
