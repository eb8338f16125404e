package statestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

func testAnchor(t *testing.T, data, hash, ws string) *domain.Anchor {
	t.Helper()
	return &domain.Anchor{Profile: "claude", Workspace: ws, Hash: hash, DataRoot: data}
}

func TestLocate(t *testing.T) {
	data := t.TempDir()
	a := testAnchor(t, data, "aaaaaaaaaaaa", "/w/a")
	own := filepath.Join(data, "domains", "aaaaaaaaaaaa", "overlay")
	prof := filepath.Join(data, "claude", "overlay")
	if st := Locate(a, config.PersistProfile); st.Root != prof || !st.Shared || st.Legacy {
		t.Errorf("profile: %+v", st)
	}
	for _, mode := range []string{config.PersistWorkspace, ""} {
		if st := Locate(a, mode); st.Root != own || st.Shared {
			t.Errorf("%q: %+v", mode, st)
		}
	}
	// Only a mount point (no changes dir) is not a domain's own data.
	if err := os.MkdirAll(filepath.Join(own, "usr", "usr_merged"), 0o700); err != nil {
		t.Fatal(err)
	}
	if st := Locate(a, config.PersistProfile); !st.Shared {
		t.Errorf("merged dir only: %+v", st)
	}
	// A domain with changes of its own keeps them (upgrade from the
	// per-domain layout, or a switch from persist = "workspace").
	if err := os.MkdirAll(filepath.Join(own, "usr", "usr_changes"), 0o700); err != nil {
		t.Fatal(err)
	}
	if st := Locate(a, config.PersistProfile); st.Root != own || st.Shared || !st.Legacy {
		t.Errorf("legacy: %+v", st)
	}
	if c, w, m := Locate(a, "").OverlayPaths("/var/lib/dpkg"); c != filepath.Join(own, "var_lib_dpkg", "var_lib_dpkg_changes") ||
		w != filepath.Join(own, "var_lib_dpkg", "var_lib_dpkg_work") || m != filepath.Join(own, "var_lib_dpkg", "var_lib_dpkg_merged") {
		t.Errorf("paths %s %s %s", c, w, m)
	}
}

// fakePodman answers `podman container exists NAME` with exit 0 for the
// names in exists and 1 otherwise.
func fakePodman(t *testing.T, exists ...string) *podman.Client {
	t.Helper()
	script := "#!/bin/sh\n[ \"$1 $2\" = \"container exists\" ] || exit 125\ncase \"$3\" in\n"
	for _, n := range exists {
		script += n + ") exit 0 ;;\n"
	}
	script += "esac\nexit 1\n"
	bin := filepath.Join(t.TempDir(), "podman")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &podman.Client{Bin: bin}
}

func TestLockProfile(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	root := filepath.Join(data, "claude", "overlay")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	a := testAnchor(t, data, "aaaaaaaaaaaa", "/w/a")
	b := testAnchor(t, data, "bbbbbbbbbbbb", "/w/b")
	pc := fakePodman(t)

	la, err := LockProfile(ctx, pc, root, a)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockProfile(ctx, pc, root, b)
	if !errors.Is(err, ErrProfileBusy) {
		t.Fatalf("second domain: err = %v, want ErrProfileBusy", err)
	}
	for _, want := range []string{`"/w/a"`, a.Container(), "is running", "lazaret stop", `persist = "workspace"`, "[profiles.claude]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %s", want, err)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("message is not one line: %q", err)
	}
	if err := la.Release(); err != nil {
		t.Fatal(err)
	}
	lb, err := LockProfile(ctx, pc, root, b)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	// A holder that died without Release (SIGKILL) frees the flock, but
	// its container may still run on the overlays: busy while it exists.
	lb.Close()
	_, err = LockProfile(ctx, fakePodman(t, b.Container()), root, a)
	if !errors.Is(err, ErrProfileBusy) || !strings.Contains(err.Error(), "crashed coordinator") {
		t.Fatalf("leftover container: err = %v", err)
	}
	// Its own leftover container does not block a domain (recovery removes it).
	lb2, err := LockProfile(ctx, fakePodman(t, b.Container()), root, b)
	if err != nil {
		t.Fatalf("own leftover: %v", err)
	}
	lb2.Close()
	// Once the container is gone, another domain takes over.
	la2, err := LockProfile(ctx, pc, root, a)
	if err != nil {
		t.Fatalf("container gone: %v", err)
	}
	if err := la2.Release(); err != nil {
		t.Fatal(err)
	}
	if err := la2.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
}

func TestLockProfileRefusesSymlink(t *testing.T) {
	root := filepath.Join(t.TempDir(), "overlay")
	if err := os.Symlink(filepath.Join(root, "elsewhere"), SideFile(root, lockFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LockProfile(context.Background(), fakePodman(t), root, testAnchor(t, root, "aaaaaaaaaaaa", "/w")); err == nil {
		t.Fatal("a symlinked lock file was followed")
	}
}
