package statestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/vault"
)

// testOps are Fork's and Keep's file operations run as the test's user:
// each inside a window on the vaults of roots (those that exist), which
// the user namespace's root needs not. Copies are plain.
func testOps(roots ...string) fileOps {
	in := func(fn func() error) error {
		for _, r := range slices.Backward(roots) {
			if _, err := os.Lstat(r); err != nil {
				continue
			}
			inner := fn
			fn = func() error { return vault.With(r, 0o700, inner) }
		}
		return fn()
	}
	return fileOps{
		copy: func(_ context.Context, src, dst string) (string, error) {
			return "copy", in(func() error {
				if out, err := exec.Command("cp", "-a", "--preserve=xattr", "--", src, dst).CombinedOutput(); err != nil {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			})
		},
		canReflink: func(context.Context, string, string) (bool, error) { return false, nil },
		fold: func(_ context.Context, upper, target, driver string) error {
			return in(func() error { return Fold(upper, target, driver) })
		},
		removeAll: func(_ context.Context, paths ...string) error {
			return in(func() error {
				for _, p := range paths {
					if err := os.RemoveAll(p); err != nil {
						return err
					}
				}
				return nil
			})
		},
		usage: func(_ context.Context, paths ...string) (map[string]int64, error) {
			sizes := map[string]int64{}
			err := in(func() error {
				for _, p := range paths {
					err := filepath.Walk(p, func(_ string, fi os.FileInfo, err error) error {
						if err == nil {
							sizes[p] += fi.Size()
						}
						return err
					})
					if err != nil {
						return err
					}
				}
				return nil
			})
			return sizes, err
		},
		free: func(string) (int64, error) { return 1 << 40, nil },
	}
}

// inVault runs fn with vault v open to the test's user.
func inVault(t *testing.T, v string, fn func()) {
	t.Helper()
	if err := vault.Seal(v); err != nil {
		t.Fatal(err)
	}
	if err := vault.With(v, 0o700, func() error { fn(); return nil }); err != nil {
		t.Fatal(err)
	}
}

// entries describes the tree under dir, one string per entry: a file's
// content, a symlink's target, "whiteout", "dir" (+" opaque").
func entries(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case IsWhiteout(fi):
			out[rel] = "whiteout"
		case fi.IsDir() && IsOpaque(p):
			out[rel] = "dir opaque"
		case fi.IsDir():
			out[rel] = "dir"
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "-> " + l
		default:
			out[rel] = content(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// listing is root's entries two levels deep, sorted.
func listing(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	inVault(t, root, func() {
		ents, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			out = append(out, e.Name())
			if !e.IsDir() {
				continue
			}
			sub, err := os.ReadDir(filepath.Join(root, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sub {
				out = append(out, e.Name()+"/"+s.Name())
			}
		}
	})
	slices.Sort(out)
	return out
}

func treeOf(t *testing.T, root, dir string) map[string]string {
	t.Helper()
	var m map[string]string
	inVault(t, root, func() { m = entries(t, dir) })
	return m
}

func diffTrees(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s = %q", what, k, got[k])
		}
	}
}

// profileFixture is a profile's shared store: the profile's layer of /usr
// (and of /opt/x, empty) with its record, head "h", pending layers L1 and
// L2 (its chain), L1b (begun on h too, ended after L1: not in the chain),
// and L3 in state l3 above L2.
type profileFixture struct {
	data string
	st   Store
	dirs []string
}

// dataDir is a data root whose vaults the test's cleanup can remove.
func dataDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	t.Cleanup(func() {
		// Each dir is opened before its entries are read.
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, _ error) error {
			if e != nil && e.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
	})
	return d
}

func newProfileFixture(t *testing.T, l3 string) profileFixture {
	t.Helper()
	data := dataDir(t)
	root := filepath.Join(data, "prof", "overlay")
	f := profileFixture{data: data, st: Store{Root: root, Shared: true, DataRoot: data}, dirs: []string{"/usr", "/opt/x", "/var/none"}}
	t0 := time.Unix(1_000_000, 0)
	layers := []Layer{
		{ID: "L1", Parent: "h", State: LayerPending, Ended: t0.Add(1)},
		{ID: "L1b", Parent: "h", State: LayerPending, Ended: t0.Add(2)},
		{ID: "L2", Parent: "L1", State: LayerPending, Ended: t0.Add(3)},
		{ID: "L3", Parent: "L2", State: l3},
	}
	if err := vault.Seal(root); err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		l.Dirs = []string{"/usr", "/opt/x"}
		if err := WriteLayer(root, l, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteHead(root, Head{Generation: 4, Head: "h"}); err != nil {
		t.Fatal(err)
	}
	inVault(t, root, func() {
		pl := ProfileLayer(root, "/usr")
		write(t, filepath.Join(pl, "bin/a"), "a0")
		write(t, filepath.Join(pl, "bin/b"), "b0")
		write(t, filepath.Join(pl, "lib/x/1"), "1")
		write(t, filepath.Join(pl, "lib/x/2"), "2")
		write(t, filepath.Join(pl, "share/gone"), "g")
		mkWhiteout(t, filepath.Join(pl, "imagefile"))
		if err := os.MkdirAll(ProfileLayer(root, "/opt/x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(filepath.Join(root, "usr", RecordFile), Record{Dir: "/usr", Image: "img", ImageID: "id1", Driver: "overlay"}); err != nil {
			t.Fatal(err)
		}
		up := func(id string) string { u, _, _ := LayerPaths(root, id, "/usr"); return u }
		write(t, filepath.Join(up("L1"), "bin/a"), "a1")
		mkWhiteout(t, filepath.Join(up("L1"), "share/gone"))
		write(t, filepath.Join(up("L1"), "etc/n"), "n")
		write(t, filepath.Join(up("L1b"), "bin/a"), "sibling")
		write(t, filepath.Join(up("L2"), "lib/x/3"), "3")
		setOpaque(t, filepath.Join(up("L2"), "lib/x"))
		write(t, filepath.Join(up("L2"), "bin/c"), "c2")
		write(t, filepath.Join(up("L3"), "bin/a"), "a3")
		mkWhiteout(t, filepath.Join(up("L3"), "bin/b"))
		if err := os.Symlink("a", filepath.Join(up("L3"), "bin/link")); err != nil {
			t.Fatal(err)
		}
	})
	return f
}

// chainTree is what a sandbox started on the fixture shows in /usr's
// changes (profile's layer, L1, L2); withL3 adds L3 on top.
func chainTree(withL3 bool) map[string]string {
	m := map[string]string{
		"bin": "dir", "bin/a": "a1", "bin/b": "b0", "bin/c": "c2",
		"lib": "dir", "lib/x": "dir opaque", "lib/x/3": "3",
		"share": "dir", "share/gone": "whiteout", "imagefile": "whiteout",
		"etc": "dir", "etc/n": "n",
	}
	if withL3 {
		m["bin/a"], m["bin/b"], m["bin/link"] = "a3", "whiteout", "-> a"
	}
	return m
}

// attemptStore is the attempt's own root under the fixture's data root.
func (f profileFixture) attemptStore(hash string) Store {
	return Store{Root: filepath.Join(f.data, "domains", hash, "overlay"), DataRoot: f.data}
}

// TestForkStack: the copy shows the stack a sandbox of the parent shows:
// running (profile's layer, the pending layers below its own, its own),
// stopped (the chain a start would stack); the sibling left pending is
// not in it; the source is untouched.
func TestForkStack(t *testing.T) {
	for _, tc := range []struct {
		name, l3, active string
		layers           []string
	}{
		{"running", LayerActive, "L3", []string{"L1", "L2", "L3"}},
		{"stopped", LayerActive, "", []string{"L1", "L2"}},
		{"stopped, L3 pending", LayerPending, "", []string{"L1", "L2", "L3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProfileFixture(t, tc.l3)
			before := treeOf(t, f.st.Root, f.st.Root)
			dst := f.attemptStore("att")
			res, err := fork(context.Background(), testOps(f.st.Root, dst.Root), ForkSource{Store: f.st, Dirs: f.dirs, Active: tc.active}, dst)
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != "copy" || !slices.Equal(res.Layers, tc.layers) || res.Bytes <= 0 {
				t.Errorf("result %+v, want mode copy, layers %v", res, tc.layers)
			}
			diffTrees(t, "attempt's /usr", treeOf(t, dst.Root, filepath.Join(dst.Root, "usr/usr_changes")), chainTree(len(tc.layers) == 3))
			if got := listing(t, dst.Root); !slices.Equal(got, []string{"opt_x", "opt_x/opt_x_changes", "usr", "usr/image.json", "usr/usr_changes"}) {
				t.Errorf("attempt's root holds %q", got)
			}
			if fi, err := os.Lstat(dst.Root); err != nil || fi.Mode().Perm() != 0 {
				t.Errorf("attempt's root not sealed: %v %v", fi, err)
			}
			rec, err := dst.Record("/usr")
			if err != nil || rec == nil || rec.ImageID != "id1" || rec.Driver != "overlay" {
				t.Errorf("record %+v %v", rec, err)
			}
			diffTrees(t, "parent after the fork", treeOf(t, f.st.Root, f.st.Root), before)
		})
	}
}

// failingOps makes op number n (counting the calls of the operation
// named) fail with err.
func failingOps(ops fileOps, op string, n int, err error) fileOps {
	calls := 0
	fail := func() error {
		calls++
		if calls == n {
			return err
		}
		return nil
	}
	switch op {
	case "copy":
		inner := ops.copy
		ops.copy = func(ctx context.Context, src, dst string) (string, error) {
			if err := fail(); err != nil {
				return "", err
			}
			return inner(ctx, src, dst)
		}
	case "fold":
		inner := ops.fold
		ops.fold = func(ctx context.Context, u, tg, d string) error {
			if err := fail(); err != nil {
				return err
			}
			return inner(ctx, u, tg, d)
		}
	case "removeAll":
		inner := ops.removeAll
		ops.removeAll = func(ctx context.Context, paths ...string) error {
			if err := fail(); err != nil {
				return err
			}
			return inner(ctx, paths...)
		}
	}
	return ops
}

// TestForkFailureLeavesNothing: a failure at any step (a copy that ran
// out of space, a fold) removes all Fork made, the dirs it created above
// the attempt's root included, and says why in one line.
func TestForkFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		op string
		n  int
	}{{"copy", 1}, {"copy", 3}, {"fold", 2}, {"copy", 5}} {
		t.Run(fmt.Sprintf("%s %d", tc.op, tc.n), func(t *testing.T) {
			f := newProfileFixture(t, LayerActive)
			dst := f.attemptStore("att")
			cause := errors.New("copying x to y: cp: error writing 'y/f': No space left on device")
			ops := failingOps(testOps(f.st.Root, dst.Root), tc.op, tc.n, cause)
			_, err := fork(context.Background(), ops, ForkSource{Store: f.st, Dirs: f.dirs, Active: "L3"}, dst)
			if !errors.Is(err, cause) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line wrapping %v", err, cause)
			}
			if _, err := os.Lstat(filepath.Join(f.data, "domains")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the attempt's dirs survive the failure: %v", err)
			}
		})
	}
	// A root that existed (empty) stays, emptied.
	f := newProfileFixture(t, LayerActive)
	dst := f.attemptStore("att")
	if err := vault.Seal(dst.Root); err != nil {
		t.Fatal(err)
	}
	ops := failingOps(testOps(f.st.Root, dst.Root), "fold", 1, errors.New("boom"))
	if _, err := fork(context.Background(), ops, ForkSource{Store: f.st, Dirs: f.dirs}, dst); err == nil {
		t.Fatal("no error")
	}
	if names, err := vault.Names(dst.Root); err != nil || len(names) != 0 {
		t.Errorf("the existing root holds %q after the failure (%v)", names, err)
	}
}

// TestForkRoom: without reflinks a copy bigger than the free space is
// refused before anything is made, naming both sizes; with them it goes.
func TestForkRoom(t *testing.T) {
	f := newProfileFixture(t, LayerActive)
	dst := f.attemptStore("att")
	ops := testOps(f.st.Root, dst.Root)
	ops.free = func(string) (int64, error) { return 10, nil }
	_, err := fork(context.Background(), ops, ForkSource{Store: f.st, Dirs: f.dirs}, dst)
	if err == nil || !strings.Contains(err.Error(), "has 10 bytes free") || !strings.Contains(err.Error(), "needs ") {
		t.Fatalf("error %v, want a refusal naming the sizes", err)
	}
	if _, err := os.Lstat(filepath.Join(f.data, "domains")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refusal left the attempt's dirs: %v", err)
	}
	ops.canReflink = func(context.Context, string, string) (bool, error) { return true, nil }
	ops.copy = func(ctx context.Context, src, dst string) (string, error) {
		_, err := testOps(f.st.Root, f.attemptStore("att").Root).copy(ctx, src, dst)
		return "reflink", err
	}
	res, err := fork(context.Background(), ops, ForkSource{Store: f.st, Dirs: f.dirs}, dst)
	if err != nil || res.Mode != "reflink" {
		t.Errorf("with reflinks: %+v %v", res, err)
	}
}

// TestForkOwnStore: a store of the domain's own is its changes dir alone;
// it has no layers to name; an attempt's root that holds anything, or a
// shared one, is refused.
func TestForkOwnStore(t *testing.T) {
	data := dataDir(t)
	src := Store{Root: filepath.Join(data, "domains", "parent", "overlay"), DataRoot: data}
	inVault(t, src.Root, func() {
		write(t, filepath.Join(src.Root, "usr/usr_changes/bin/tool"), "t")
		mkWhiteout(t, filepath.Join(src.Root, "usr/usr_changes/gone"))
		write(t, filepath.Join(src.Root, "usr/usr_work/work/x"), "junk")
	})
	dst := Store{Root: filepath.Join(data, "domains", "att", "overlay"), DataRoot: data}
	ops := testOps(src.Root, dst.Root)
	if _, err := fork(context.Background(), ops, ForkSource{Store: src, Dirs: []string{"/usr"}, Active: "L"}, dst); err == nil {
		t.Error("a layer of a store without layers accepted")
	}
	res, err := fork(context.Background(), ops, ForkSource{Store: src, Dirs: []string{"/usr"}}, dst)
	if err != nil || res.Mode != "copy" || len(res.Layers) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	diffTrees(t, "attempt's /usr", treeOf(t, dst.Root, filepath.Join(dst.Root, "usr/usr_changes")),
		map[string]string{"bin": "dir", "bin/tool": "t", "gone": "whiteout"})
	if got := listing(t, dst.Root); !slices.Equal(got, []string{"usr", "usr/usr_changes"}) {
		t.Errorf("attempt's root holds %q", got)
	}
	if _, err := fork(context.Background(), ops, ForkSource{Store: src, Dirs: []string{"/usr"}}, dst); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("fork into a root that holds a copy: %v", err)
	}
	shared := Store{Root: filepath.Join(data, "prof", "overlay"), Shared: true, DataRoot: data}
	if _, err := fork(context.Background(), ops, ForkSource{Store: src, Dirs: []string{"/usr"}}, shared); err == nil {
		t.Error("fork into a shared root accepted")
	}
	// Nothing to copy: nothing made.
	empty := Store{Root: filepath.Join(data, "domains", "none", "overlay"), DataRoot: data}
	if res, err := fork(context.Background(), ops, ForkSource{Store: src, Dirs: []string{"/opt"}}, empty); err != nil || res.Mode != "" {
		t.Errorf("nothing to copy: %+v %v", res, err)
	}
	if _, err := os.Lstat(filepath.Dir(empty.Root)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nothing to copy made %s: %v", empty.Root, err)
	}
}
