//go:build integration

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecStateAnchorModes: the State Anchor's upper dirs keep agent-made
// setuid files owned by the user, so a start while other users can search
// the whole path to them is refused (docs/STATEANCHOR.md, "Modes"). After
// a first start made the layout, the test opens every directory from the
// test's temp root down to the profile's overlay root (0755): `lazaret exec
// -- true` fails with one line naming the overlay root, its mode and the
// exact fix, leaves no container, coordinator or mount, and changes no
// mode; `lazaret state` and doctor report it with the same fix. Pasting the fix makes the
// next start work. Control: with only the
// profile dir and the overlay root opened (the data root, 0700, still
// closes the path) the start goes ahead.
func TestSecStateAnchorModes(t *testing.T) {
	e := NewEnv(t)
	e.MustRun("exec", "--", "true")
	e.MustRun("stop")
	hash := domainOf(t, e, "default").Hash
	prof := filepath.Join(e.DataRoot, "default")
	vault := filepath.Join(prof, "overlay")
	if fi, err := os.Lstat(vault); err != nil || fi.Mode().Perm() != 0 {
		t.Fatalf("overlay root after a start: %v %v", fi, err)
	}
	chmod := func(mode os.FileMode, dirs ...string) {
		t.Helper()
		for _, d := range dirs {
			if err := os.Chmod(d, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { chmod(0o700, prof, vault) })

	// Control first: the data root closes the path.
	chmod(0o755, prof, vault)
	e.MustRun("exec", "--", "true")
	e.MustRun("stop")

	chmod(0o755, e.Root, e.DataRoot, prof, vault)
	r := e.Run("exec", "--", "true")
	if r.Code == 0 {
		t.Fatalf("a start with the path open to other users went ahead; stderr: %s", r.Stderr)
	}
	var line string
	for _, l := range strings.Split(r.Stderr, "\n") {
		if strings.Contains(l, "not closed to other users") {
			if line != "" {
				t.Errorf("said twice: %q", r.Stderr)
			}
			line = l
		}
	}
	fix := "chmod 0700 " + e.DataRoot + " " + prof + " && chmod 000 " + vault
	if line == "" || !strings.Contains(line, vault+" (mode 0755)") || !strings.HasSuffix(line, "fix: "+fix) {
		t.Fatalf("want one line naming %s, mode 0755 and the fix %q; stderr:\n%s", vault, fix, r.Stderr)
	}
	t.Logf("refused (exit %d): %s", r.Code, line)
	Eventually(t, 30*time.Second, "the refused start's coordinator and containers to go", func() bool {
		return len(coordinatorPIDs(e.Workspace)) == 0 && len(sandboxContainersOf(t, hash)) == 0
	})
	if out, err := exec.Command("podman", "unshare", "cat", "/proc/self/mountinfo").Output(); err != nil || strings.Contains(string(out), e.DataRoot) {
		t.Errorf("a mount under the data root is left (%v):\n%s", err, out)
	}
	for _, d := range []string{e.DataRoot, prof, vault} {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("the refused start changed %s: %v %v", d, fi.Mode(), err)
		}
	}

	// `lazaret state` says the same, and doctor with the same fix.
	if st := e.Run("state"); st.Code == 0 || !strings.Contains(st.Stderr, "fix: "+fix) {
		t.Errorf("state with the path open: exit %d\n%s%s", st.Code, st.Stdout, st.Stderr)
	}
	d := e.Run("doctor")
	if d.Code == 0 || !strings.Contains(d.Stdout, "FAIL  State Anchor modes") || !strings.Contains(d.Stdout, "fix: "+fix) {
		t.Errorf("doctor with the path open: exit %d\n%s", d.Code, d.Stdout)
	}

	// The fix, pasted as printed, and the sandbox starts again.
	if out, err := exec.Command("sh", "-c", fix).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", fix, err, out)
	}
	if out := e.MustRun("exec", "--", "sh", "-c", "echo ok"); strings.TrimSpace(out) != "ok" {
		t.Errorf("after the fix: %q", out)
	}
	if d := e.Run("doctor"); !strings.Contains(d.Stdout, "ok    State Anchor modes") {
		t.Errorf("doctor after the fix:\n%s", d.Stdout)
	}
}
