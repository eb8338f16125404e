package statestore

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// openBase returns a directory whose whole path from / is open to other
// users (t.TempDir's parent is 0700, which alone would close every path).
func openBase(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Sub-tests' temp dirs are removed by the parent's cleanup; modes 000
	// below would stop it.
	t.Cleanup(func() {
		filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() && fi.Mode()&os.ModeSymlink == 0 {
				os.Chmod(p, 0o700)
			}
			return nil
		})
	})
	return d
}

// mkdirs makes each path with its mode (parents first, in order).
func mkdirs(t *testing.T, dirs ...any) {
	t.Helper()
	for i := 0; i < len(dirs); i += 2 {
		p, bits := dirs[i].(string), dirs[i+1].(int)
		mode := os.FileMode(bits & 0o777)
		if bits&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
}

func wantExposed(t *testing.T, err error, dir, inFix string) *ExposedError {
	t.Helper()
	var ee *ExposedError
	if !errors.As(err, &ee) || !errors.Is(err, ErrExposed) {
		t.Fatalf("want an ExposedError naming %s, got %v", dir, err)
	}
	if ee.Dir != dir {
		t.Errorf("names %s, want %s: %v", ee.Dir, dir, err)
	}
	if !strings.Contains(ee.Fix, inFix) {
		t.Errorf("fix %q lacks %q", ee.Fix, inFix)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, "fix: ") || !strings.Contains(msg, "mode ") {
		t.Errorf("not one line with mode and fix: %q", msg)
	}
	return ee
}

// applyFix runs the error's fix in a shell, as the user would paste it.
func applyFix(t *testing.T, ee *ExposedError) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", ee.Fix).CombinedOutput(); err != nil {
		t.Fatalf("fix %q: %v: %s", ee.Fix, err, out)
	}
}

// TestCheckClosedLayouts: the path to a profile's and a domain's overlay
// root, fresh, as lazaret makes it, and loosened in each place.
func TestCheckClosedLayouts(t *testing.T) {
	type layout struct {
		name  string
		setup func(t *testing.T, data, prof, vault string)
		// wantDir is the directory the refusal names ("" = accepted);
		// fix a part of its fix.
		wantDir func(data, prof, vault string) string
		fix     string
	}
	accept := func(string, string, string) string { return "" }
	for _, root := range []struct{ name, rel string }{
		{"profile", "claude/overlay"},
		{"domain", "domains/0123456789ab/overlay"},
		{"spaces", "my profile/over lay"},
	} {
		for _, tc := range []layout{
			{"fresh", func(*testing.T, string, string, string) {}, accept, ""},
			{"data root only", func(t *testing.T, data, _, _ string) { mkdirs(t, data, 0o755) }, accept, ""},
			{"open down to a missing vault", func(t *testing.T, data, prof, _ string) { mkdirs(t, data, 0o755, prof, 0o755) }, accept, ""},
			{"as lazaret makes it", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o700, prof, 0o700, vault, 0) }, accept, ""},
			{"vault open, profile dir closes", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o755, prof, 0o700, vault, 0o755) }, accept, ""},
			{"profile dir open, vault closes", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o755, prof, 0o755, vault, 0) }, accept, ""},
			{"data root closes", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o700, prof, 0o755, vault, 0o755) }, accept, ""},
			{"vault left mid-window (owner only)", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o755, prof, 0o755, vault, 0o100) }, accept, ""},
			{"all open", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o755, prof, 0o755, vault, 0o755) },
				func(_, _, v string) string { return v }, "chmod 000 "},
			{"group can search", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o750, prof, 0o710, vault, 0o710) },
				func(_, _, v string) string { return v }, "chmod 0700 "},
			{"others can search only", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o701, prof, 0o701, vault, 0o001) },
				func(_, _, v string) string { return v }, "chmod 000 "},
			{"profile dir writable by others", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o700, prof, 0o777, vault, 0) },
				func(_, p, _ string) string { return p }, "chmod go-w "},
			{"vault writable by group", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o700, prof, 0o700, vault, 0o070) },
				func(_, _, v string) string { return v }, "chmod go-w "},
			{"sticky data root is still lazaret's", func(t *testing.T, data, prof, vault string) { mkdirs(t, data, 0o1777, prof, 0o700, vault, 0) },
				func(d, _, _ string) string { return d }, "chmod go-w "},
			{"profile dir is a symlink", func(t *testing.T, data, prof, vault string) {
				real := data + "-elsewhere"
				mkdirs(t, data, 0o700, real, 0o700, filepath.Join(real, filepath.Base(vault)), 0)
				os.MkdirAll(filepath.Dir(prof), 0o700)
				if err := os.Symlink(real, prof); err != nil {
					t.Fatal(err)
				}
			}, func(_, p, _ string) string { return p }, "data_root"},
			{"vault is a file", func(t *testing.T, data, prof, vault string) {
				mkdirs(t, data, 0o700, prof, 0o700)
				os.WriteFile(vault, nil, 0o600)
			}, func(_, _, v string) string { return v }, "move it away"},
		} {
			t.Run(root.name+"/"+tc.name, func(t *testing.T) {
				data := filepath.Join(openBase(t), "data")
				vault := filepath.Join(data, root.rel)
				prof := filepath.Dir(vault)
				if root.name == "domain" {
					// lazaret makes it 0700; open, it must not be what closes.
					mkdirs(t, filepath.Join(data, "domains"), 0o755)
				}
				tc.setup(t, data, prof, vault)
				err := CheckClosed(data, vault)
				want := tc.wantDir(data, prof, vault)
				if want == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				ee := wantExposed(t, err, want, tc.fix)
				if strings.HasPrefix(tc.fix, "chmod ") {
					applyFix(t, ee)
					if err := CheckClosed(data, vault); err != nil {
						t.Errorf("after the fix %q: %v", ee.Fix, err)
					}
				}
			})
		}
	}
}

// TestCheckClosedFixAll: the refusal of an open path lists every open
// directory of lazaret's with its mode and restores all of them, and it
// does not create or change anything itself.
func TestCheckClosedFixAll(t *testing.T) {
	data := filepath.Join(openBase(t), "data")
	prof, vault := filepath.Join(data, "claude"), filepath.Join(data, "claude", "overlay")
	mkdirs(t, data, 0o755, prof, 0o711, vault, 0o755)
	err := CheckClosed(data, vault)
	ee := wantExposed(t, err, vault, "chmod 0700 "+data+" "+prof+" && chmod 000 "+vault)
	if !strings.Contains(ee.Problem, prof+" 0711") || ee.Mode != 0o755 {
		t.Errorf("problem %q mode %o", ee.Problem, ee.Mode)
	}
	fi, _ := os.Stat(vault)
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("the check changed the vault's mode: %v", fi.Mode())
	}
	applyFix(t, ee)
	for p, want := range map[string]os.FileMode{data: 0o700, prof: 0o700, vault: 0} {
		if fi, _ := os.Lstat(p); fi.Mode().Perm() != want {
			t.Errorf("%s: %v after the fix, want %v", p, fi.Mode().Perm(), want)
		}
	}
}

// TestCheckClosedAncestors: above the data root, directories of root's or
// the user's are fine, a sticky world-writable one (/tmp) too; a
// non-sticky writable one or another user's is refused; a symlink in the
// configured data root is resolved, and the real path checked.
func TestCheckClosedAncestors(t *testing.T) {
	t.Run("writable parent", func(t *testing.T) {
		base := openBase(t)
		mkdirs(t, filepath.Join(base, "shared"), 0o777)
		data := filepath.Join(base, "shared", "data")
		mkdirs(t, data, 0o700)
		wantExposed(t, CheckClosed(data, filepath.Join(data, "p", "overlay")), filepath.Join(base, "shared"), "chmod go-w ")
	})
	t.Run("sticky parent", func(t *testing.T) {
		base := openBase(t)
		mkdirs(t, filepath.Join(base, "tmp"), 0o1777)
		data := filepath.Join(base, "tmp", "data")
		mkdirs(t, data, 0o700)
		if err := CheckClosed(data, filepath.Join(data, "p", "overlay")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("symlinked data root", func(t *testing.T) {
		base := openBase(t)
		real := filepath.Join(base, "real data")
		mkdirs(t, real, 0o755, filepath.Join(real, "p"), 0o755, filepath.Join(real, "p", "overlay"), 0o755)
		link := filepath.Join(base, "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		err := CheckClosed(link, filepath.Join(link, "p", "overlay"))
		ee := wantExposed(t, err, filepath.Join(real, "p", "overlay"), "'"+real+"'")
		applyFix(t, ee)
		if err := CheckClosed(link, filepath.Join(link, "p", "overlay")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("another user's", func(t *testing.T) {
		base := openBase(t)
		data := filepath.Join(base, "data")
		mkdirs(t, data, 0o700)
		defer func(f func() int) { getuid = f }(getuid)
		me := os.Getuid()
		getuid = func() int { return me + 4242 } // everything of the test's is "another user's"
		err := CheckClosed(data, filepath.Join(data, "p", "overlay"))
		var ee *ExposedError
		if !errors.As(err, &ee) || !strings.Contains(ee.Problem, "owned by uid") {
			t.Fatalf("want an owner refusal, got %v", err)
		}
	})
	t.Run("not below the data root", func(t *testing.T) {
		base := openBase(t)
		if err := CheckClosed(filepath.Join(base, "data"), filepath.Join(base, "other", "overlay")); err == nil {
			t.Fatal("accepted a root outside data_root")
		}
	})
}

// TestCheckClosedChowned: as root, a data root chowned to another user is
// refused even with mode 0700 (that user could open it).
func TestCheckClosedChowned(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to chown")
	}
	data := filepath.Join(openBase(t), "data")
	mkdirs(t, data, 0o700)
	if err := os.Chown(data, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	wantExposed(t, CheckClosed(data, filepath.Join(data, "p", "overlay")), data, "data_root")
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"/a/b-c_d.e": "/a/b-c_d.e", "/a b": "'/a b'", "/it's": `'/it'\''s'`, "/$x": "'/$x'"} {
		if got := shellQuote(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestOverlayRoots: profiles' and domains' overlay roots, whatever their
// modes; nothing else.
func TestOverlayRoots(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	mkdirs(t, filepath.Join(data, "claude", "overlay"), 0, filepath.Join(data, "domains", "abc", "overlay"), 0o755,
		filepath.Join(data, "domains", "def", "workspace"), 0o700, filepath.Join(data, "old"), 0o700)
	got := OverlayRoots(data)
	want := []string{filepath.Join(data, "claude", "overlay"), filepath.Join(data, "domains", "abc", "overlay")}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("OverlayRoots = %v, want %v", got, want)
	}
	if got := OverlayRoots(filepath.Join(data, "missing")); len(got) != 0 {
		t.Errorf("missing data root: %v", got)
	}
}
