package gitsentry

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// evilPack returns a pack holding a commit whose tree has an entry named
// ".git" (git itself refuses to create one; fsck flags it because a
// checkout of it would plant a repository).
func evilPack(t *testing.T) []byte {
	t.Helper()
	src := newRepo(t)
	blob := hg(t, src, "hash-object", "-w", "--stdin")
	raw, _ := hex.DecodeString(blob)
	tree := append([]byte("100644 .git\x00"), raw...)
	cmd := exec.Command("git", "-C", src, "hash-object", "-w", "-t", "tree", "--literally", "--stdin")
	cmd.Stdin = bytes.NewReader(tree)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	treeID := strings.TrimSpace(string(out))
	commit := hg(t, src, "commit-tree", "-m", "evil", treeID)
	cmd = exec.Command("git", "-C", src, "pack-objects", "--stdout")
	cmd.Stdin = strings.NewReader(commit + "\n" + treeID + "\n" + blob + "\n")
	pack, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return pack
}

func TestImportPackRejectsBadObjects(t *testing.T) {
	pack := evilPack(t)
	host := newRepo(t)
	g := &Git{}
	repo, err := OpenHostRepo(context.Background(), g, host)
	if err != nil {
		t.Fatal(err)
	}
	s := &Syncer{Git: g, Repo: repo}
	if err := s.importPack(context.Background(), bytes.NewReader(pack)); err == nil {
		t.Fatal("a pack with a .git tree entry was imported")
	}
	if packs, _ := filepath.Glob(filepath.Join(host, ".git", "objects", "pack", "*.pack")); len(packs) != 0 {
		t.Errorf("rejected pack left in the repository: %v", packs)
	}
	// Control: without --strict, git takes the same pack.
	ctl := newRepo(t)
	cmd := exec.Command("git", "-C", ctl, "index-pack", "--stdin")
	cmd.Stdin = bytes.NewReader(pack)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("control: plain index-pack refused the pack: %v: %s", err, out)
	}
}

func TestImportPackSizeLimit(t *testing.T) {
	host := newRepo(t)
	g := &Git{}
	repo, _ := OpenHostRepo(context.Background(), g, host)
	src := newRepo(t)
	os.WriteFile(filepath.Join(src, "big"), bytes.Repeat([]byte("x"), 1<<16), 0o644)
	hg(t, src, "add", "big")
	hg(t, src, "commit", "-q", "-m", "big")
	cmd := exec.Command("git", "-C", src, "pack-objects", "--stdout", "--revs")
	cmd.Stdin = strings.NewReader("HEAD\n")
	pack, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	s := &Syncer{Git: g, Repo: repo, MaxPack: int64(len(pack) / 2)}
	if err := s.importPack(context.Background(), bytes.NewReader(pack)); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Fatalf("oversized pack: %v", err)
	}
	s.MaxPack = 0
	if err := s.importPack(context.Background(), bytes.NewReader(pack)); err != nil {
		t.Fatalf("normal pack: %v", err)
	}
}
