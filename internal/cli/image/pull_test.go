package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// fakePodman: `image exists` exits 1 (missing) unless have is set; `pull`
// logs its argv to a file and fails like an offline podman unless pullOK.
func fakePodman(t *testing.T, have, pullOK bool) (*podman.Client, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "pulls")
	exists := "exit 1"
	if have {
		exists = "exit 0"
	}
	pull := `echo 'Trying to pull docker.io/library/node:22...' >&2
echo 'Error: initializing source docker://node:22: pinging container registry registry-1.docker.io: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host' >&2
exit 125`
	if pullOK {
		pull = "echo 'Copying blob done' >&2; echo sha256:abc; exit 0"
	}
	script := "#!/bin/sh\ncase \"$1 $2\" in\n\"image exists\") " + exists + " ;;\n\"pull --\") echo \"$3\" >> " + log + "\n" + pull + " ;;\nesac\nexit 125\n"
	bin := filepath.Join(dir, "podman")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &podman.Client{Bin: bin}, log
}

func profile(t *testing.T, image string) *config.Profile {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	cfg, err := config.Parse("/home/u/.config/lazaret/config.toml", []byte("[profiles.claude]\n\nimage = \""+image+"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Profiles["claude"]
}

func TestEnsureOfflinePull(t *testing.T) {
	pc, log := fakePodman(t, false, false)
	var progress strings.Builder
	p := profile(t, "docker.io/library/node:22-bookworm")
	_, err := Ensure(context.Background(), pc, p, &progress, false)
	var u *Unavailable
	if !errors.As(err, &u) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"profile claude", "docker.io/library/node:22-bookworm", "no registry reachable",
		"/home/u/.config/lazaret/config.toml:3", "profiles.claude.image", "podman pull docker.io/library/node:22-bookworm"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	if strings.ContainsAny(msg, "\n\r") {
		t.Errorf("not one line: %q", msg)
	}
	if !strings.Contains(progress.String(), "Trying to pull") {
		t.Errorf("podman's progress not relayed: %q", progress.String())
	}
	if data, _ := os.ReadFile(log); string(data) != "docker.io/library/node:22-bookworm\n" {
		t.Errorf("pulled %q", data)
	}
}

func TestEnsureCases(t *testing.T) {
	ctx := context.Background()
	var out strings.Builder
	// Present: nothing to do on start.
	pc, log := fakePodman(t, true, true)
	if pulled, err := Ensure(ctx, pc, profile(t, "node:22"), &out, false); err != nil || pulled {
		t.Errorf("present: %v %v", pulled, err)
	}
	// Explicit pull of a present image updates it.
	if pulled, err := Ensure(ctx, pc, profile(t, "node:22"), &out, true); err != nil || !pulled {
		t.Errorf("explicit: %v %v", pulled, err)
	}
	if data, _ := os.ReadFile(log); string(data) != "node:22\n" {
		t.Errorf("pulled %q", data)
	}
	pc, log = fakePodman(t, false, true)
	for _, tc := range []struct{ image, want string }{
		{AgentImage, "run: lazaret image build agent"},
		{config.DefaultImage, "run: lazaret image build default"},
		{"localhost/mine:1", "cannot be pulled (localhost/ images"},
		{"node:latest", "run: lazaret image pull claude"},
	} {
		_, err := Ensure(ctx, pc, profile(t, tc.image), &out, false)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.image, err, tc.want)
		}
	}
	if _, err := os.Stat(log); !errors.Is(err, os.ErrNotExist) {
		t.Error("pulled an image that must not be pulled on start")
	}
	// Pinned and missing: pulled on start.
	if pulled, err := Ensure(ctx, pc, profile(t, "node:22"), &out, false); err != nil || !pulled {
		t.Errorf("pinned: %v %v", pulled, err)
	}
}

func TestUnavailableIsOneLine(t *testing.T) {
	u := &Unavailable{Profile: "p1", Image: "x\ny", File: "/c\r.toml", Line: 2, Why: "a\x1b[2J", Fix: "f"}
	if s := u.Error(); strings.ContainsAny(s, "\n\r\x1b") {
		t.Errorf("%q", s)
	}
}
