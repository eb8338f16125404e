package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/shellwords"
)

// FuzzLoad feeds arbitrary documents through the decoder and the
// validator: it must never panic, every error must be one *Error per line
// naming the file, and a success must only hold safe values.
func FuzzLoad(f *testing.F) {
	root := f.TempDir()
	f.Setenv("HOME", filepath.Join(root, "home"))
	f.Setenv("XDG_DATA_HOME", filepath.Join(root, "data"))
	f.Setenv("XDG_RUNTIME_DIR", filepath.Join(root, "run"))
	f.Setenv("LZ_FUZZ_VAR", "value")
	f.Add(Starter)
	f.Add([]byte("[escalation]\nauto_approve = [\"make lint {args}\", \"npm {args} x\", \"go run .\"]\n"))
	f.Add([]byte("[profiles.claude]\nimage = \"node:22\"\nvolumes = [{host = \"{profile_dir}/home\", container = \"/root\", mode = \"ro,z\"}]\n"))
	f.Add([]byte(secretsDoc))
	f.Add([]byte("[secrets.a]\nvalue = \"file:~/k\"\ncommand = [1]\nrefresh = \"1s\"\nhosts = [\"*.com\", \"A.b\"]\nformat = \"x\"\n[profiles.p1]\nimage = \"x:1\"\nsecrets = { a = \"LAZARET_X\", b = 1 }\n"))
	f.Add([]byte("data_rot = 1\n[network]\nallow_egress = [\"x\", 5, {a = 1}]\n[profiles.\"a b\"]\nimage = 1\n[profiles.c]\nenv = {A = [1]}\nvolumes = [{hots = 1}, 2]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.toml", data)
		if err != nil {
			errs := Errors(err)
			if len(errs) == 0 {
				t.Fatalf("error %T is not a config error: %v", err, err)
			}
			for _, e := range append(errs, &Error{Msg: err.Error()}) {
				s := e.Error()
				if strings.ContainsFunc(s, isControl) {
					t.Fatalf("error is not one clean line: %q", s)
				}
			}
			for _, e := range errs {
				// The schema walk leaves nothing the typed decoder refuses.
				if strings.Contains(e.Msg, "cannot decode: ") {
					t.Fatalf("the schema walk let through what the decoder refuses: %q", e.Error())
				}
				if !strings.HasPrefix(e.Error(), "fuzz.toml") {
					t.Fatalf("error does not name the file: %q", e.Error())
				}
			}
			if c != nil {
				t.Fatal("config returned with an error")
			}
			return
		}
		for _, w := range c.Warnings {
			if strings.ContainsFunc(w, isControl) {
				t.Fatalf("warning is not one clean line: %q", w)
			}
		}
		for _, p := range []string{c.DataRoot, c.Escalation.SocketDir} {
			if !filepath.IsAbs(p) || hasDotDot(p) || p == "/" {
				t.Fatalf("unsafe global path %q", p)
			}
		}
		if c.Profiles[DefaultProfileName] == nil {
			t.Fatal("no default profile")
		}
		for name, p := range c.Profiles {
			if ValidProfileName(name) != nil || p.Name != name || p.Image == "" || strings.HasPrefix(p.Image, "-") {
				t.Fatalf("unsafe profile %q: %+v", name, p)
			}
			for _, v := range p.Volumes {
				if checkContainerPath(v.Container) != nil || strings.ContainsRune(v.Host, 0) || hasDotDot(v.Host) {
					t.Fatalf("unsafe volume %+v", v)
				}
			}
			for _, argv := range c.Escalation.AutoApprove {
				if len(argv) == 0 || strings.ContainsRune(argv[0], 0) || argv[0] == shellwords.ArgsPlaceholder ||
					slices.Contains(argv[:len(argv)-1], shellwords.ArgsPlaceholder) || shellwords.BannedEntryReason(argv) != "" {
					t.Fatalf("bad auto_approve %q", argv)
				}
			}
		}
	})
}

// FuzzExpand checks the path expansion invariants: an accepted path is
// absolute, clean, canonical and never has a ".." segment or a NUL byte.
func FuzzExpand(f *testing.F) {
	root := f.TempDir()
	f.Setenv("HOME", filepath.Join(root, "home"))
	tk := Tokens{ProfileName: "claude", DataRoot: filepath.Join(root, "data"), DomainHash: "0123456789ab", WorkspaceDir: filepath.Join(root, "ws")}
	for _, s := range []string{"~/x", "{profile_dir}/home", "{profile_dir}/../../etc", "~user/x", "some/~", "/a/{unknown}", "/a\x00b", "{workspace_dir}/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ExpandPath(s, tk)
		if err != nil {
			if strings.ContainsFunc(err.Error(), func(r rune) bool { return r == 0 || r == '\n' }) {
				t.Fatalf("error message carries NUL or newline: %q", err.Error())
			}
			return
		}
		if !filepath.IsAbs(p) || hasDotDot(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) || strings.ContainsAny(p, ",:") {
			t.Fatalf("ExpandPath(%q) = %q: not a safe canonical path", s, p)
		}
		if strings.Contains(s, "..") && hasDotDot(strings.ReplaceAll(s, "~", "x")) {
			t.Fatalf("ExpandPath(%q) accepted a '..' segment: %q", s, p)
		}
	})
}

// BenchmarkParseDeep measures a hostile, deeply nested document: indexing
// positions must stay linear (it was quadratic before maxIndexDepth).
func BenchmarkParseDeep(b *testing.B) {
	doc := []byte("a = " + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + "\n" +
		strings.Repeat("x.", 5000) + "y = 1\n")
	for b.Loop() {
		_, _ = Parse("deep.toml", doc)
	}
}

// BenchmarkParseStarter measures loading a typical file (every command
// pays it once).
func BenchmarkParseStarter(b *testing.B) {
	for b.Loop() {
		if _, err := Parse("starter.toml", Starter); err != nil {
			b.Fatal(err)
		}
	}
}
