package statestore

import (
	"errors"
	"testing"
)

func TestValidateDir(t *testing.T) {
	good := []string{"/usr", "/etc", "/var", "/opt/tools", "/root", "/usr/local", "/runner", "/tmpfoo", "/workspaces"}
	for _, d := range good {
		if err := ValidateDir(d); err != nil {
			t.Errorf("ValidateDir(%q) = %v, want nil", d, err)
		}
	}
	bad := []string{"", "usr", "./usr", "/", "/usr/", "/usr/../etc", "//usr", "/proc", "/proc/sys", "/sys", "/dev", "/dev/shm",
		"/run", "/run/lazaret", "/tmp", "/tmp/x", "/workspace", "/workspace/.git", "/a,b", "/a:b", "/a=b", `/a\b`, "/a\nb", "/a\x00b"}
	for _, d := range bad {
		if err := ValidateDir(d); !errors.Is(err, ErrBadDir) {
			t.Errorf("ValidateDir(%q) = %v, want ErrBadDir", d, err)
		}
	}
}

func TestValidateDirs(t *testing.T) {
	if err := ValidateDirs([]string{"/usr", "/etc", "/var", "/opt"}); err != nil {
		t.Fatal(err)
	}
	for _, dirs := range [][]string{
		{"/usr", "/usr/local"},
		{"/usr/local", "/usr"},
		{"/usr", "/usr"},
		{"/var/lib", "/var_lib"}, // same overlay name
		{"/usr", "/proc"},
	} {
		if err := ValidateDirs(dirs); !errors.Is(err, ErrBadDir) {
			t.Errorf("ValidateDirs(%q) = %v, want ErrBadDir", dirs, err)
		}
	}
}

func FuzzValidateDir(f *testing.F) {
	for _, s := range []string{"/usr", "/", "/proc/x", "/a,b", "usr", "/usr/../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, d string) {
		if ValidateDir(d) != nil {
			return
		}
		// Whatever passes is a clean absolute path outside the managed
		// trees, usable in fuse-overlayfs options and --mount.
		if d == "/" || d[0] != '/' {
			t.Fatalf("accepted %q", d)
		}
		for _, f := range forbidden {
			if Within(d, f) {
				t.Fatalf("accepted %q under %s", d, f)
			}
		}
		for _, r := range d {
			if r == ',' || r == ':' || r == '=' || r < 0x20 {
				t.Fatalf("accepted %q with %q", d, r)
			}
		}
	})
}
