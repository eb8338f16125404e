package overlayfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
)

func TestCopyArgv(t *testing.T) {
	ctx := context.Background()
	c, log := fakePodman(t, "copy\n")
	if mode, err := c.Copy(ctx, "/s", "/d"); err != nil || mode != CopyPlain {
		t.Fatalf("Copy = %q, %v", mode, err)
	}
	if got, want := argv(t, log), []string{"unshare", "bash", "-c", copyScript, "stateanchor-copy", "copy", "/s", "/d"}; !slices.Equal(got, want) {
		t.Errorf("podman argv\n got %q\nwant %q", got, want)
	}
	c, log = fakePodman(t, "no\n")
	if ok, err := c.CanReflink(ctx, "/s", "/dir"); err != nil || ok {
		t.Fatalf("CanReflink = %v, %v", ok, err)
	}
	if got, want := argv(t, log), []string{"unshare", "bash", "-c", copyScript, "stateanchor-copy", "probe", "/s", "/dir"}; !slices.Equal(got, want) {
		t.Errorf("podman argv\n got %q\nwant %q", got, want)
	}
	c, _ = fakePodman(t, "what\n")
	if _, err := c.Copy(ctx, "/s", "/d"); err == nil {
		t.Error("unexpected output accepted")
	}
}

// TestCopyFailureIsOneLine: the error names the cause in one line, not
// podman's wrapping of the whole stderr.
func TestCopyFailureIsOneLine(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "podman")
	script := "#!/bin/sh\necho \"cp: error writing '/d/f': No space left on device\" >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := New(&podman.Client{Bin: bin, Env: []string{"PATH=" + os.Getenv("PATH")}})
	_, err := c.Copy(context.Background(), "/s", "/d")
	want := "copying /s to /d: cp: error writing '/d/f': No space left on device"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// runCopyScript runs copyScript as Copy does, but as the test's own user
// (prefix: a command to run it under, such as unshare).
func runCopyScript(t *testing.T, prefix []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	argv := append(slices.Clone(prefix), "bash", "-c", copyScript, "stateanchor-copy")
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// makeTree makes a layer as an overlay leaves it: a file and its hard
// link, a symlink, a whiteout (char 0:0), an opaque dir (the kernel's
// xattr) with fuse-overlayfs's mark too, a closed dir and old times.
func makeTree(t *testing.T, root string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "bin"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "share/opq"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "secret"), 0o755))
	must(os.WriteFile(filepath.Join(root, "bin/tool"), []byte("tool"), 0o4755))
	must(os.Chmod(filepath.Join(root, "bin/tool"), 0o4755))
	must(os.Link(filepath.Join(root, "bin/tool"), filepath.Join(root, "bin/alias")))
	must(os.Symlink("tool", filepath.Join(root, "bin/link")))
	must(os.WriteFile(filepath.Join(root, "share/opq/f"), []byte("f"), 0o644))
	if err := unix.Mknod(filepath.Join(root, "bin/gone"), unix.S_IFCHR, 0); err != nil {
		t.Skipf("cannot make a whiteout (char 0:0): %v", err)
	}
	for _, x := range []string{"user.overlay.opaque", "user.fuseoverlayfs.opaque"} {
		if err := unix.Lsetxattr(filepath.Join(root, "share/opq"), x, []byte("y"), 0); err != nil {
			t.Skipf("cannot set %s: %v", x, err)
		}
	}
	old := time.Unix(1_000_000_000, 0)
	must(os.Chtimes(filepath.Join(root, "share/opq/f"), old, old))
	must(os.WriteFile(filepath.Join(root, "secret/key"), []byte("k"), 0o600))
	must(os.Chmod(filepath.Join(root, "secret"), 0o700))
}

// checkTree verifies that dst is src's copy in all makeTree made.
func checkTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		q := filepath.Join(dst, rel)
		a, err := os.Lstat(p)
		if err != nil {
			return err
		}
		b, err := os.Lstat(q)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		sa, sb := a.Sys().(*syscall.Stat_t), b.Sys().(*syscall.Stat_t)
		if a.Mode() != b.Mode() || sa.Uid != sb.Uid || sa.Gid != sb.Gid || sa.Rdev != sb.Rdev {
			t.Errorf("%s: %v %d:%d rdev %d, copy %v %d:%d rdev %d", rel, a.Mode(), sa.Uid, sa.Gid, sa.Rdev, b.Mode(), sb.Uid, sb.Gid, sb.Rdev)
		}
		if !a.IsDir() && !a.ModTime().Equal(b.ModTime()) {
			t.Errorf("%s: mtime %v, copy %v", rel, a.ModTime(), b.ModTime())
		}
		if a.Mode().IsRegular() && sa.Nlink != sb.Nlink {
			t.Errorf("%s: %d links, copy %d", rel, sa.Nlink, sb.Nlink)
		}
		for _, x := range []string{"user.overlay.opaque", "user.fuseoverlayfs.opaque"} {
			va, ea := xattr(p, x)
			vb, eb := xattr(q, x)
			if va != vb || (ea == nil) != (eb == nil) {
				t.Errorf("%s: %s = %q (%v), copy %q (%v)", rel, x, va, ea, vb, eb)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "bin/link")); err != nil || l != "tool" {
		t.Errorf("symlink: %q %v", l, err)
	}
	a, _ := os.Lstat(filepath.Join(dst, "bin/tool"))
	b, _ := os.Lstat(filepath.Join(dst, "bin/alias"))
	if a == nil || b == nil || a.Sys().(*syscall.Stat_t).Ino != b.Sys().(*syscall.Stat_t).Ino {
		t.Error("the hard link is two files in the copy")
	}
}

func xattr(p, name string) (string, error) {
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(p, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// TestCopyScript runs the copy as the test's user: the tree is kept whole,
// the mode printed matches the probe, and an existing dst is refused.
func TestCopyScript(t *testing.T) {
	d := t.TempDir()
	src, dst := filepath.Join(d, "src"), filepath.Join(d, "dst")
	makeTree(t, src)
	out, errs, code := runCopyScript(t, nil, "copy", src, dst)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkTree(t, src, dst)
	probe, errs, code := runCopyScript(t, nil, "probe", src, d)
	if code != 0 {
		t.Fatalf("probe: exit %d: %s", code, errs)
	}
	want := map[string]string{"yes\n": "reflink\n", "no\n": "copy\n"}[probe]
	if out != want {
		t.Errorf("copy printed %q, probe %q", out, probe)
	}
	t.Logf("reflinks in %s: %s", d, strings.TrimSpace(probe))
	if _, errs, code := runCopyScript(t, nil, "copy", src, dst); code == 0 || !strings.Contains(errs, "already exists") {
		t.Errorf("copy over an existing dst: exit %d, %q", code, errs)
	}
	ents, _ := os.ReadDir(d)
	if len(ents) != 2 {
		t.Errorf("the probe left files: %v", ents)
	}
}

// TestCopyScriptNoSpace: a copy that fills its file system (a small tmpfs,
// in a namespace of the test's own) removes what it made and says why in
// one line.
func TestCopyScriptNoSpace(t *testing.T) {
	if err := exec.Command("unshare", "-rm", "true").Run(); err != nil {
		t.Skipf("no user namespace for the test: %v", err)
	}
	d := t.TempDir()
	src, small := filepath.Join(d, "src"), filepath.Join(d, "small")
	for _, p := range []string{src, small} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "big"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapper := `mount -t tmpfs -o size=256k none "$1" || exit 9
bash -c "$S" stateanchor-copy copy "$2" "$1/dst"; rc=$?
[ -e "$1/dst" ] && echo "dst left behind" >&2
exit $rc`
	cmd := exec.Command("unshare", "-rm", "--", "bash", "-c", wrapper, "wrapper", small, src)
	cmd.Env = append(os.Environ(), "S="+copyScript)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("want exit 1, got %v: %s", err, out)
	}
	if msg := strings.TrimSpace(string(out)); strings.Contains(msg, "\n") || !strings.Contains(msg, "No space left on device") {
		t.Errorf("stderr %q: want one line naming the cause", msg)
	}
}

// TestCopyInNamespace runs Copy for real, as root of podman's user
// namespace, on a tree whose files belong to the sandbox's sub-uids.
// Skipped where rootless podman cannot run (as root, or without podman).
func TestCopyInNamespace(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root: rootless podman's user namespace is what is tested")
	}
	ctx := context.Background()
	pc := &podman.Client{}
	if _, err := pc.Unshare(ctx, "true"); err != nil {
		t.Skipf("podman unshare: %v", err)
	}
	c := New(pc)
	d := t.TempDir()
	src, dst := filepath.Join(d, "src"), filepath.Join(d, "dst")
	makeTree(t, src)
	t.Cleanup(func() { _ = c.RemoveAll(context.Background(), src, dst) })
	// The sandbox's users: container uid 1000 is a sub-uid of the host's.
	if _, err := pc.Unshare(ctx, "chown", "-h", "1000:1000", filepath.Join(src, "bin/link"), filepath.Join(src, "share/opq"), filepath.Join(src, "bin/gone")); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Unshare(ctx, "chown", "-R", "1001:1001", filepath.Join(src, "secret")); err != nil {
		t.Fatal(err)
	}
	mode, err := c.Copy(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mode %s", mode)
	// secret is closed to the host user: compare it in the namespace.
	if out, err := pc.Unshare(ctx, "sh", "-c", `stat -c '%u:%g %a' "$1/secret/key" "$2/secret/key"`, "sh", src, dst); err != nil {
		t.Fatal(err)
	} else if l := strings.Split(strings.TrimSpace(string(out)), "\n"); len(l) != 2 || l[0] != l[1] || l[0] != "1001:1001 600" {
		t.Errorf("secret/key in the namespace: %q", l)
	}
	for _, p := range []string{src, dst} {
		if _, err := pc.Unshare(ctx, "chmod", "0755", filepath.Join(p, "secret")); err != nil {
			t.Fatal(err)
		}
	}
	checkTree(t, src, dst)
	if _, err := c.Copy(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("copy over an existing dst: %v", err)
	}
}
