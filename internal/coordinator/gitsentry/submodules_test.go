package gitsentry

import (
	"strings"
	"testing"
)

// The submodule parsers read git's output for a tree that may come from the
// agent's branch: whatever they return must pass safeRelPath before use,
// and they must not panic.
func FuzzSubmoduleParsers(f *testing.F) {
	const oidA, oidB = "0123456789abcdef0123456789abcdef01234567", "89abcdef0123456789abcdef0123456789abcdef"
	f.Add([]byte("160000 "+oidA+" 0\tdeps/sub\x00100644 "+oidB+" 0\tREADME\x00"), []byte("submodule.deps/sub.path\ndeps/sub\x00"))
	f.Add([]byte("160000 "+oidA+" 1\tconflict\x00160000 x 0\t\x00"), []byte("submodule.../escape.path\nevil\x00submodule..path\nx\x00"))
	f.Add([]byte("160000 "+oidA+" 0\tsub/.GIT/x\x00"), []byte("submodule.a.path\n../../etc\x00nonsense"))
	f.Fuzz(func(t *testing.T, lsFiles, gitmodules []byte) {
		for _, l := range parseGitlinks(lsFiles) {
			if strings.ContainsRune(l.path, 0) || strings.Contains(l.oid, " ") {
				t.Fatalf("gitlink %+v", l)
			}
			if safeRelPath(l.path) && (strings.HasPrefix(l.path, "/") || strings.Contains("/"+l.path+"/", "/../")) {
				t.Fatalf("safeRelPath accepted %q", l.path)
			}
		}
		for path, name := range parseSubmodulePaths(gitmodules) {
			if name == "" {
				t.Fatalf("empty name for %q", path)
			}
			for _, p := range []string{path, name} {
				if safeRelPath(p) && (strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../") || strings.Contains(strings.ToLower("/"+p+"/"), "/.git/")) {
					t.Fatalf("safeRelPath accepted %q", p)
				}
			}
		}
	})
}

func TestSafeRelPath(t *testing.T) {
	for p, want := range map[string]bool{
		"sub": true, "deps/sub": true, "a.git": true,
		"": false, ".": false, "..": false, "../x": false, "a/../../x": false, "/abs": false,
		"a//b": false, "a/./b": false, `a\b`: false, ".git": false, "x/.GIT/y": false, "a/": false,
	} {
		if got := safeRelPath(p); got != want {
			t.Errorf("safeRelPath(%q) = %v, want %v", p, got, want)
		}
	}
}
