package statestore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func mkWhiteout(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(p, unix.S_IFCHR, 0); err != nil {
		t.Skipf("cannot make a whiteout (char 0:0): %v", err)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func setOpaque(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Lsetxattr(dir, kernelOpaque, []byte("y"), 0); err != nil {
		t.Skipf("cannot set %s: %v", kernelOpaque, err)
	}
}

func content(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestFold: a fold leaves the target showing what upper over target
// showed: files replaced and added, whiteouts replacing (and still
// hiding the image's entry), opaque dirs replacing wholesale and staying
// opaque, plain dirs merged, a dir over a target whiteout made opaque.
func TestFold(t *testing.T) {
	d := t.TempDir()
	u, tg := filepath.Join(d, "upper"), filepath.Join(d, "target")
	write(t, filepath.Join(tg, "bin/keep"), "keep")
	write(t, filepath.Join(tg, "bin/tool"), "old")
	write(t, filepath.Join(tg, "lib/gone"), "gone")
	write(t, filepath.Join(tg, "share/x/a"), "a")
	write(t, filepath.Join(tg, "share/x/b"), "b")
	write(t, filepath.Join(tg, "etc/f"), "f")
	if err := os.MkdirAll(tg, 0o755); err != nil {
		t.Fatal(err)
	}
	mkWhiteout(t, filepath.Join(tg, "hidden"))

	write(t, filepath.Join(u, "bin/tool"), "new")
	write(t, filepath.Join(u, "bin/added"), "added")
	mkWhiteout(t, filepath.Join(u, "lib/gone"))
	mkWhiteout(t, filepath.Join(u, "imagefile"))
	write(t, filepath.Join(u, "share/x/c"), "c")
	setOpaque(t, filepath.Join(u, "share/x"))
	write(t, filepath.Join(u, "hidden/new"), "n") // a plain dir over the target's whiteout
	if err := os.Symlink("tool", filepath.Join(u, "bin/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(u, "bin"), 0o711); err != nil {
		t.Fatal(err)
	}

	if err := Fold(u, tg, "overlay"); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"bin/keep": "keep", "bin/tool": "new", "bin/added": "added", "share/x/c": "c", "etc/f": "f", "hidden/new": "n"} {
		if got := content(t, filepath.Join(tg, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	for _, p := range []string{"lib/gone", "imagefile"} {
		fi, err := os.Lstat(filepath.Join(tg, p))
		if err != nil || !IsWhiteout(fi) {
			t.Errorf("%s: not a whiteout after the fold: %v %v", p, fi, err)
		}
	}
	for _, p := range []string{"share/x/a", "share/x/b"} {
		if _, err := os.Lstat(filepath.Join(tg, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived its opaque dir's replacement: %v", p, err)
		}
	}
	for _, p := range []string{"share/x", "hidden"} {
		if !IsOpaque(filepath.Join(tg, p)) {
			t.Errorf("%s is not opaque after the fold", p)
		}
	}
	if IsOpaque(filepath.Join(tg, "bin")) {
		t.Error("a merged plain dir became opaque")
	}
	if fi, _ := os.Stat(filepath.Join(tg, "bin")); fi == nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("bin's mode was not taken from the upper: %v", fi)
	}
	if l, _ := os.Readlink(filepath.Join(tg, "bin/link")); l != "tool" {
		t.Errorf("symlink: %q", l)
	}
	if empty, err := LayerEmpty(u); err != nil || !empty {
		t.Errorf("upper not emptied by the fold: %v %v", empty, err)
	}
	// Folding again (a fold cut short is finished this way) changes nothing.
	if err := Fold(u, tg, "overlay"); err != nil {
		t.Fatal(err)
	}
	if got := content(t, filepath.Join(tg, "bin/tool")); got != "new" {
		t.Errorf("after a second fold: %q", got)
	}
}

// TestFoldFuseForms: fuse-overlayfs's OCI forms (.wh.NAME, .wh..wh..opq)
// are honoured, and a dir made opaque for it gets its file.
func TestFoldFuseForms(t *testing.T) {
	d := t.TempDir()
	u, tg := filepath.Join(d, "upper"), filepath.Join(d, "target")
	write(t, filepath.Join(tg, "a"), "a")
	write(t, filepath.Join(tg, "dir/old"), "old")
	write(t, filepath.Join(tg, ".wh.back"), "")
	write(t, filepath.Join(u, ".wh.a"), "")
	write(t, filepath.Join(u, "dir/"+opaqueFile), "")
	write(t, filepath.Join(u, "dir/new"), "new")
	write(t, filepath.Join(u, "back/f"), "f")
	if err := Fold(u, tg, "fuse-overlayfs"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(tg, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a not deleted: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(tg, ".wh.a")); err != nil {
		t.Errorf("whiteout .wh.a not kept: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(tg, "dir/old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("opaque dir merged: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(tg, ".wh.back")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("whiteout of a re-created dir kept: %v", err)
	}
	if !IsOpaque(filepath.Join(tg, "back")) || content(t, filepath.Join(tg, "back/f")) != "f" {
		t.Error("a dir re-created over a whiteout is not opaque with its content")
	}
}

// TestFoldIntoMissingTarget: a profile layer that does not exist yet
// becomes the upper itself.
func TestFoldIntoMissingTarget(t *testing.T) {
	d := t.TempDir()
	u, tg := filepath.Join(d, "upper"), filepath.Join(d, "target")
	write(t, filepath.Join(u, "f"), "f")
	if err := Fold(u, tg, "overlay"); err != nil {
		t.Fatal(err)
	}
	if content(t, filepath.Join(tg, "f")) != "f" {
		t.Error("not moved")
	}
	if err := Fold(u, tg, "overlay"); err != nil {
		t.Errorf("second fold: %v", err)
	}
}

// TestChain: the pending layers that fast-forward the head, in order; a
// sibling begun on the same layer is left out (kept for the user), an
// active one is never stacked, one cut short while folding comes first.
func TestChain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ls := []Layer{
		{ID: "1", Parent: "h", State: LayerPending, Ended: t0.Add(2)},
		{ID: "2", Parent: "h", State: LayerPending, Ended: t0.Add(1)},
		{ID: "3", Parent: "2", State: LayerPending, Ended: t0.Add(3)},
		{ID: "4", Parent: "3", State: LayerActive},
		{ID: "5", Parent: "old", State: LayerPending},
	}
	ids := func(ls []Layer) (s string) {
		for _, l := range ls {
			s += l.ID
		}
		return s
	}
	if got := ids(Chain(Head{Head: "h"}, ls)); got != "23" {
		t.Errorf("chain = %q, want 23", got)
	}
	ls[0].State = LayerFolding
	if got := ids(Chain(Head{Head: "h"}, ls)); got != "1" {
		t.Errorf("chain with a fold cut short = %q, want 1", got)
	}
	if got := ids(Chain(Head{Head: "none"}, ls)); got != "" {
		t.Errorf("chain of an unknown head = %q", got)
	}
}

// TestLayerRecords: layers and the head round-trip through the vault;
// a registration is alive while held and found dead after.
func TestLayerRecords(t *testing.T) {
	d := t.TempDir()
	root := filepath.Join(d, "overlay")
	if err := os.Mkdir(root, 0o000); err != nil {
		t.Fatal(err)
	}
	l := Layer{ID: NewLayerID("abcdef0123456789"), Parent: "", State: LayerActive, Dirs: []string{"/usr"}}
	if err := WriteLayer(root, l, true); err != nil {
		t.Fatal(err)
	}
	if empty, err := LayerIsEmpty(root, l); err != nil || !empty {
		t.Errorf("new layer empty = %v %v", empty, err)
	}
	if err := WriteHead(root, Head{Generation: 3, Head: "x"}); err != nil {
		t.Fatal(err)
	}
	if h, err := ReadHead(root); err != nil || h.Generation != 3 || h.Head != "x" {
		t.Errorf("head %+v %v", h, err)
	}
	ls, err := ReadLayers(root)
	if err != nil || len(ls) != 1 || ls[0].ID != l.ID || ls[0].State != LayerActive {
		t.Fatalf("layers %+v %v", ls, err)
	}
	reg, err := Register(root, Holder{Layer: l.ID, Container: "c"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Registrations(root)
	if err != nil || len(rs) != 1 || !rs[0].Alive {
		t.Fatalf("registrations while held: %+v %v", rs, err)
	}
	reg.Close() // as a crash: the file stays, the lock goes
	rs, err = Registrations(root)
	if err != nil || len(rs) != 1 || rs[0].Alive || rs[0].Container != "c" {
		t.Fatalf("registrations after a crash: %+v %v", rs, err)
	}
	rs[0].Release()
	if rs, _ := Registrations(root); len(rs) != 0 {
		t.Errorf("released registration still listed: %+v", rs)
	}
}

// TestProfileLockShared: sandboxes share the profile's lock; the
// exclusive one (fold, reset) is had only when none holds it.
func TestProfileLockShared(t *testing.T) {
	root := filepath.Join(t.TempDir(), "overlay")
	a, err := ShareProfile(root, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ShareProfile(root, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := TryExclusive(root); err != nil || ex != nil {
		t.Fatalf("exclusive while shared: %v %v", ex, err)
	}
	a.Close()
	b.Close()
	ex, err := TryExclusive(root)
	if err != nil || ex == nil {
		t.Fatalf("exclusive when free: %v", err)
	}
	if _, err := ShareProfile(root, 50*time.Millisecond); !errors.Is(err, ErrProfileBusy) {
		t.Errorf("shared while exclusive: %v", err)
	}
	ex.Close()
}
