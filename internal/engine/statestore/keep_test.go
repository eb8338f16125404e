package statestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/overlayfs"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// forkedFixture is the profile fixture (L3 pending) forked into an
// attempt whose sandbox then changed /usr and its record.
func forkedFixture(t *testing.T) (profileFixture, Store, ForkResult, map[string]string) {
	t.Helper()
	f := newProfileFixture(t, LayerPending)
	att := f.attemptStore("att")
	// The stopped parent's chain without L3: L3 plays a pending layer
	// begun on the old profile layer that the fork did not take.
	src := ForkSource{Store: f.st, Dirs: f.dirs}
	l3 := Layer{ID: "L3", Parent: "h", State: LayerPending, Dirs: []string{"/usr"}, Ended: time.Unix(1_000_010, 0)}
	if err := WriteLayer(f.st.Root, l3, false); err != nil {
		t.Fatal(err)
	}
	res, err := fork(context.Background(), testOps(f.st.Root, att.Root), src, att)
	if err != nil {
		t.Fatal(err)
	}
	inVault(t, att.Root, func() {
		write(t, filepath.Join(att.Root, "usr/usr_changes/bin/new"), "attempt")
		write(t, filepath.Join(att.Root, "usr/usr_work/work/junk"), "")
		write(t, filepath.Join(att.Root, "usr/mount.log"), "")
	})
	od, err := vault.Open(att.Root, "usr", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = WriteJSON(od.Join(RecordFile), Record{Dir: "/usr", Image: "img", ImageID: "id2", Driver: "overlay"})
	od.Close()
	if err != nil {
		t.Fatal(err)
	}
	return f, att, res, treeOf(t, att.Root, filepath.Join(att.Root, "usr/usr_changes"))
}

// checkKept verifies the parent after a keep of the forked fixture.
func checkKept(t *testing.T, f profileFixture, att Store, want map[string]string) {
	t.Helper()
	diffTrees(t, "profile's /usr", treeOf(t, f.st.Root, ProfileLayer(f.st.Root, "/usr")), want)
	if rec, err := f.st.Record("/usr"); err != nil || rec == nil || rec.ImageID != "id2" {
		t.Errorf("profile's record %+v %v, want the attempt's", rec, err)
	}
	if got := listing(t, f.st.Root); !slices.Equal(got, []string{
		".layers", ".layers/L1b", ".layers/L3", ".layers/head.json",
		"opt_x", "opt_x/opt_x_changes", "usr", "usr/image.json", "usr/usr_changes",
	}) {
		t.Errorf("profile's root holds %q", got)
	}
	h, err := ReadHead(f.st.Root)
	if err != nil || h.Generation != 5 || h.Head == "h" || h.Head == "" {
		t.Errorf("head %+v %v: want generation 5 and a new ID", h, err)
	}
	ls, err := ReadLayers(f.st.Root)
	if err != nil {
		t.Fatal(err)
	}
	if c := Chain(h, ls); len(c) != 0 {
		t.Errorf("layers still fast-forward the kept layer: %+v", c)
	}
	for _, d := range f.dirs {
		if att.Has(d) {
			t.Errorf("the attempt still has %s", d)
		}
	}
	if _, err := os.Lstat(SideFile(f.st.Root, keepFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the intent survives: %v", err)
	}
}

// TestKeep: the profile's layer becomes the attempt's, the dropped
// pending layers go, the others stay and no longer fast-forward.
func TestKeep(t *testing.T) {
	f, att, res, want := forkedFixture(t)
	if !slices.Equal(res.Layers, []string{"L1", "L2"}) {
		t.Fatalf("fork took %v", res.Layers)
	}
	if err := keep(context.Background(), testOps(f.st.Root, att.Root), att, f.st, f.dirs, res.Layers); err != nil {
		t.Fatal(err)
	}
	checkKept(t, f, att, want)
	// Again: the attempt has nothing left to keep; nothing changes.
	if err := keep(context.Background(), testOps(f.st.Root, att.Root), att, f.st, f.dirs, res.Layers); err != nil {
		t.Fatal(err)
	}
	checkKept(t, f, att, want)
}

// TestKeepStagingFailure: a keep that fails before any swap puts the
// attempt's dirs back and leaves the parent as it was; the next one works.
func TestKeepStagingFailure(t *testing.T) {
	f, att, res, want := forkedFixture(t)
	before := treeOf(t, f.st.Root, f.st.Root)
	ops := failingOps(testOps(f.st.Root, att.Root), "removeAll", 2, errors.New("boom"))
	if err := keep(context.Background(), ops, att, f.st, f.dirs, res.Layers); err == nil {
		t.Fatal("no error")
	}
	diffTrees(t, "parent after a failed keep", treeOf(t, f.st.Root, f.st.Root), before)
	if !att.HasChanges("/usr") || !att.HasChanges("/opt/x") {
		t.Error("the attempt's dirs were not put back")
	}
	if _, err := os.Lstat(SideFile(f.st.Root, keepFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the intent survives: %v", err)
	}
	if err := keep(context.Background(), testOps(f.st.Root, att.Root), att, f.st, f.dirs, res.Layers); err != nil {
		t.Fatal(err)
	}
	checkKept(t, f, att, want)
}

// TestKeepResume: a keep cut short after its point of no return (the
// head bumped, or a dir swapped and its old one not yet removed) is
// finished by the next call.
func TestKeepResume(t *testing.T) {
	t.Run("after the swap", func(t *testing.T) {
		f, att, res, want := forkedFixture(t)
		// The removal of /usr's old layer fails: a crash there.
		ops := failingOps(testOps(f.st.Root, att.Root), "removeAll", 3, errors.New("crash"))
		if err := keep(context.Background(), ops, att, f.st, f.dirs, res.Layers); err == nil {
			t.Fatal("no error")
		}
		if _, err := os.Lstat(SideFile(f.st.Root, keepFile)); err != nil {
			t.Errorf("no intent left for the next call: %v", err)
		}
		diffTrees(t, "profile's /usr, swapped", treeOf(t, f.st.Root, ProfileLayer(f.st.Root, "/usr")), want)
		if err := keep(context.Background(), testOps(f.st.Root, att.Root), att, f.st, f.dirs, res.Layers); err != nil {
			t.Fatal(err)
		}
		checkKept(t, f, att, want)
	})
	t.Run("after the head", func(t *testing.T) {
		f, att, res, want := forkedFixture(t)
		ops := testOps(f.st.Root, att.Root)
		in, err := newKeep(att, f.st, f.dirs, res.Layers)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(SideFile(f.st.Root, keepFile), in); err != nil {
			t.Fatal(err)
		}
		if err := stageAll(context.Background(), ops, f.st.Root, in); err != nil {
			t.Fatal(err)
		}
		if err := WriteHead(f.st.Root, in.Head); err != nil {
			t.Fatal(err)
		}
		// Another attempt's keep finishes this one first.
		other := f.attemptStore("other")
		if err := keep(context.Background(), testOps(f.st.Root, other.Root, att.Root), other, f.st, f.dirs, nil); err != nil {
			t.Fatal(err)
		}
		checkKept(t, f, att, want)
	})
}

// TestKeepOwnStore: a parent's own store (no layers, no head) gets the
// attempt's changes in place of its own.
func TestKeepOwnStore(t *testing.T) {
	data := dataDir(t)
	parent := Store{Root: filepath.Join(data, "domains", "parent", "overlay"), DataRoot: data}
	att := Store{Root: filepath.Join(data, "domains", "att", "overlay"), DataRoot: data}
	inVault(t, parent.Root, func() {
		write(t, filepath.Join(parent.Root, "usr/usr_changes/old"), "old")
		write(t, filepath.Join(parent.Root, "usr/usr_work/work/x"), "")
		write(t, filepath.Join(parent.Root, "etc/etc_changes/keep"), "parent's")
	})
	inVault(t, att.Root, func() {
		write(t, filepath.Join(att.Root, "usr/usr_changes/new"), "new")
	})
	if err := keep(context.Background(), testOps(parent.Root, att.Root), att, parent, []string{"/usr", "/etc"}, []string{"ignored"}); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, "parent's /usr", treeOf(t, parent.Root, filepath.Join(parent.Root, "usr/usr_changes")), map[string]string{"new": "new"})
	diffTrees(t, "parent's /etc", treeOf(t, parent.Root, filepath.Join(parent.Root, "etc/etc_changes")), map[string]string{"keep": "parent's"})
	if got := listing(t, parent.Root); !slices.Equal(got, []string{"etc", "etc/etc_changes", "usr", "usr/usr_changes"}) {
		t.Errorf("parent's root holds %q", got)
	}
	if att.Has("/usr") {
		t.Error("the attempt still has /usr")
	}
}

// TestKeepAcrossFileSystems: an attempt on another file system than the
// parent (a tmpfs here) is copied in, then removed.
func TestKeepAcrossFileSystems(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "keep")
	if err != nil {
		t.Skipf("no second file system: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(shm) })
	data := dataDir(t)
	var a, b syscall.Stat_t
	if syscall.Stat(shm, &a) != nil || syscall.Stat(data, &b) != nil || a.Dev == b.Dev {
		t.Skip("/dev/shm is on the test's file system")
	}
	parent := Store{Root: filepath.Join(data, "domains", "parent", "overlay"), DataRoot: data}
	att := Store{Root: filepath.Join(shm, "att", "overlay"), DataRoot: shm}
	inVault(t, parent.Root, func() { write(t, filepath.Join(parent.Root, "usr/usr_changes/old"), "old") })
	inVault(t, att.Root, func() {
		write(t, filepath.Join(att.Root, "usr/usr_changes/bin/new"), "new")
		mkWhiteout(t, filepath.Join(att.Root, "usr/usr_changes/gone"))
		setOpaque(t, filepath.Join(att.Root, "usr/usr_changes/bin"))
	})
	od, err := vault.Open(att.Root, "usr", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = WriteJSON(od.Join(RecordFile), Record{ImageID: "id2"})
	od.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(att.Root, 0o700) })
	// A copy that fails (no space) leaves both sides as they were.
	ops := failingOps(testOps(parent.Root, att.Root), "copy", 1, errors.New("no space left on device"))
	if err := keep(context.Background(), ops, att, parent, []string{"/usr"}, nil); err == nil {
		t.Fatal("no error")
	}
	diffTrees(t, "parent's /usr after a failed copy", treeOf(t, parent.Root, filepath.Join(parent.Root, "usr/usr_changes")), map[string]string{"old": "old"})
	if got := listing(t, parent.Root); !slices.Equal(got, []string{"usr", "usr/usr_changes"}) {
		t.Errorf("parent's root holds %q after a failed copy", got)
	}
	if !att.HasChanges("/usr") {
		t.Fatal("the attempt lost /usr to a failed copy")
	}
	if err := keep(context.Background(), testOps(parent.Root, att.Root), att, parent, []string{"/usr"}, nil); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, "parent's /usr", treeOf(t, parent.Root, filepath.Join(parent.Root, "usr/usr_changes")),
		map[string]string{"bin": "dir opaque", "bin/new": "new", "gone": "whiteout"})
	if rec, err := parent.Record("/usr"); err != nil || rec == nil || rec.ImageID != "id2" {
		t.Errorf("record %+v %v", rec, err)
	}
	if att.Has("/usr") {
		t.Error("the attempt still has /usr")
	}
}

// TestForkKeepInNamespace runs Fork and Keep for real, as root of
// podman's user namespace (the fold in this test binary, which runs
// FoldVerb as lazaret's does), on layers holding files of the sandbox's
// sub-uids that the host user cannot read. Skipped where rootless podman
// cannot run (as root, or without podman).
func TestForkKeepInNamespace(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root: rootless podman's user namespace is what is tested")
	}
	ctx := context.Background()
	pc := &podman.Client{}
	if _, err := pc.Unshare(ctx, "true"); err != nil {
		t.Skipf("podman unshare: %v", err)
	}
	f := newProfileFixture(t, LayerActive)
	// Registered after the data dir's: runs before its removal.
	t.Cleanup(func() { _ = overlayfs.New(pc).RemoveAll(context.Background(), f.data) })
	upper, _, _ := LayerPaths(f.st.Root, "L2", "/usr")
	inVault(t, f.st.Root, func() { write(t, filepath.Join(upper, "secret/k"), "k") })
	if _, err := pc.Unshare(ctx, "sh", "-c", `chown -R 1000:1000 "$1/bin" && chown -R 1001:1001 "$1/secret" && chmod 700 "$1/secret"`, "sh", upper); err != nil {
		t.Fatal(err)
	}
	att := f.attemptStore("att")
	res, err := Fork(ctx, pc, ForkSource{Store: f.st, Dirs: f.dirs, Active: "L3"}, att)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork: %+v", res)
	changes := filepath.Join(att.Root, "usr/usr_changes")
	out, err := pc.Unshare(ctx, "sh", "-c", `stat -c '%u %a' "$1/secret" "$1/bin/c" && cat "$1/secret/k" && chmod 755 "$1/secret"`, "sh", changes)
	if err != nil || string(out) != "1001 700\n1000 644\nk" {
		t.Errorf("sub-uid files in the copy: %q %v", out, err)
	}
	want := chainTree(true)
	want["secret"], want["secret/k"] = "dir", "k"
	diffTrees(t, "attempt's /usr", treeOf(t, att.Root, changes), want)

	// The parent's sandbox ended: its layer is pending.
	if err := WriteLayer(f.st.Root, Layer{ID: "L3", Parent: "L2", State: LayerPending, Dirs: []string{"/usr"}}, false); err != nil {
		t.Fatal(err)
	}
	if err := Keep(ctx, pc, att, f.st, f.dirs, res.Layers); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, "profile's /usr after keep", treeOf(t, f.st.Root, ProfileLayer(f.st.Root, "/usr")), want)
	ls, err := ReadLayers(f.st.Root)
	if err != nil || len(ls) != 1 || ls[0].ID != "L1b" {
		t.Errorf("layers after keep: %+v %v", ls, err)
	}
	if att.Has("/usr") {
		t.Error("the attempt still has /usr")
	}
}
