package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

func TestHashMatchesSha256sum(t *testing.T) {
	sum := sha256.Sum256([]byte("claude:/tmp/x"))
	if got, want := Hash("claude", "/tmp/x"), hex.EncodeToString(sum[:])[:12]; got != want {
		t.Fatalf("Hash = %s, want %s", got, want)
	}
}

func TestNewCanonicalizesSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	link := filepath.Join(dir, "link")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	a, err := New("claude", real, "/data", "/run/x", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := New("claude", link, "/data", "/run/x", "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash || a.Workspace != b.Workspace {
		t.Fatalf("symlinked workspace gave %s (%s), real gave %s (%s)", b.Hash, b.Workspace, a.Hash, a.Workspace)
	}
	if c, _ := New("codex", real, "/data", "/run/x", ""); c.Hash == a.Hash {
		t.Fatal("different profiles share a hash")
	}
}

func TestOverlayPaths(t *testing.T) {
	a := &Anchor{Hash: "abc", DataRoot: "/d"}
	c, w, m := a.OverlayPaths("/usr")
	if c != "/d/domains/abc/overlay/usr/usr_changes" || w != "/d/domains/abc/overlay/usr/usr_work" || m != "/d/domains/abc/overlay/usr/usr_merged" {
		t.Fatal(c, w, m)
	}
	if OverlayName("/var/lib/") != "var_lib" {
		t.Fatal(OverlayName("/var/lib/"))
	}
}

func TestEnsurePrivateDirRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.Mkdir(target, 0o700)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if err := EnsurePrivateDir(link); err == nil {
		t.Fatal("symlinked runtime dir accepted")
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	if err := EnsurePrivateDir(open); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(open); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
}
