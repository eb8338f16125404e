package overlayfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runMount runs mountScript as the coordinator does, but in a user and
// mount namespace of the test's own (unshare -rm) instead of podman's,
// then reports whether merged shows in that namespace's mountinfo. pre, if
// set, runs first in the same namespace.
func runMount(t *testing.T, pre string, args ...string) (out string, code int) {
	t.Helper()
	wrapper := pre + `
bash -c "$S" stateanchor-mount "$@" || exit
grep -qF -- " ${6// /\\040} " /proc/self/mountinfo && echo in-mountinfo`
	cmd := exec.Command("unshare", append([]string{"-rm", "--", "bash", "-c", wrapper, "wrapper"}, args...)...)
	cmd.Env = append(os.Environ(), "S="+mountScript)
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(b), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(b), 0
}

// TestMountScript runs the script against a fake image in a directory whose
// name has a space (mountinfo escapes it): each refusal, the empty lower
// dir, a kernel overlay, and a merged dir that is already a mount point.
func TestMountScript(t *testing.T) {
	if err := exec.Command("unshare", "-rm", "true").Run(); err != nil {
		t.Skipf("no user namespace for the test: %v", err)
	}
	root := filepath.Join(t.TempDir(), "state anchor")
	img := filepath.Join(root, "image")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"image/usr/bin", "image/real", "empty"} {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(os.Symlink("real", filepath.Join(img, "link")))
	must(os.Symlink("nowhere", filepath.Join(img, "dangling")))
	must(os.Symlink("real", filepath.Join(img, "viaparent")))
	must(os.MkdirAll(filepath.Join(img, "real", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(img, "file"), nil, 0o644))
	must(os.WriteFile(filepath.Join(img, "real", "afile"), nil, 0o644))
	must(os.Symlink("real/afile", filepath.Join(img, "filelink")))
	args := func(dir string) []string {
		d := filepath.Join(root, "o"+strings.ReplaceAll(dir, "/", "_"))
		up, work, merged := filepath.Join(d, "up"), filepath.Join(d, "work"), filepath.Join(d, "merged")
		for _, p := range []string{up, work, merged} {
			must(os.MkdirAll(p, 0o755))
		}
		return []string{img, dir, filepath.Join(root, "empty"), up, work, merged, "/nonexistent/fuse-overlayfs", "new", filepath.Join(d, "mount.log"), DriverOverlay}
	}
	for _, tc := range []struct {
		dir, pre, want string
		code           int
	}{
		{dir: "/usr", want: "overlay\nin-mountinfo\n"},
		{dir: "/missing", want: "overlay\nin-mountinfo\n"}, // the empty lower dir
		{dir: "/link", want: "/link: is or passes through a symlink in the image", code: 3},
		{dir: "/viaparent/sub", want: "/viaparent/sub: is or passes through a symlink in the image", code: 3},
		{dir: "/filelink", want: "/filelink: is or passes through a symlink in the image", code: 3},
		{dir: "/dangling", want: "/dangling: dangling symlink in the image", code: 3},
		{dir: "/file", want: "/file: not a directory in the image", code: 3},
		{dir: "/usr/bin", pre: `mount -t tmpfs none "$6"`, want: "already a mount point", code: 3},
	} {
		out, code := runMount(t, tc.pre, args(tc.dir)...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, output %q; want exit %d and %q", tc.dir, code, out, tc.code, tc.want)
		}
	}
}
