package shellwords

import (
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"make lint", []string{"make", "lint"}},
		{`cargo fmt "--check"`, []string{"cargo", "fmt", "--check"}},
		{`echo 'a b' "c d"`, []string{"echo", "a b", "c d"}},
		{`echo a\ b`, []string{"echo", "a b"}},
		{`echo "x\"y"`, []string{"echo", `x"y`}},
		{`ls *.go ~`, []string{"ls", "*.go", "~"}},
	} {
		got, err := Split(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestSplitRejects(t *testing.T) {
	for _, in := range []string{
		"make lint; rm -rf ~", "a | b", "a && b", "a &", "echo $(id)", "echo `id`",
		"echo $HOME", "echo ${X}", "X=1 make", "a > f", "a < f", "", "   ", "a\nb",
		"echo \"$x\"", "! true", "(a)", "{ a; }", "if true; then a; fi",
		"a\x00b",
	} {
		if got, err := Split(in); err == nil {
			t.Errorf("Split(%q) = %q, want error", in, got)
		}
	}
}

func TestHasMeta(t *testing.T) {
	for _, in := range []string{"a;b", "a|b", "a&b", "$x", "`x`", "a>b", "a<b", `a\b`, "a\nb", "a\rb", "a\x1bb", "a\x00", "a\u0085"} {
		if !HasMeta(in) {
			t.Errorf("HasMeta(%q) = false", in)
		}
	}
	for _, in := range []string{"make lint", "cargo fmt --check", `go test "./..."`, "ünïcode"} {
		if HasMeta(in) {
			t.Errorf("HasMeta(%q) = true", in)
		}
	}
}

func TestBannedReason(t *testing.T) {
	for _, b := range []string{"git", "/usr/bin/git", "bash", "sh", "python3", "python3.11", "env", "sudo", "xargs", "node", "perl5.36",
		// The attacker's review of issue #12.
		"find", "awk", "gawk", "mawk", "sed", "perl", "python", "ruby", "node", "deno", "bun", "php", "lua", "tclsh",
		"busybox", "nice", "nohup", "timeout", "stdbuf", "setsid", "chroot", "unshare", "nsenter", "flock", "watch",
		"time", "strace", "ltrace", "gdb", "ssh", "scp", "rsync", "tar", "zip", "less", "more", "vi", "vim", "emacs",
		"nano", "man", "git-upload-pack", "git-shell", "docker", "podman", "kubectl", "lazaret", "lazaret-escalate",
		"dpkg", "apt", "apt-get", "npx", "pnpx", "bunx", "dash", "zsh", "fish", "ksh", "csh", "tcsh", "script",
		"expect", "tee", "dd", "cp", "mv", "install", "ln", "curl", "wget", "socat", "nc", "ionice", "taskset"} {
		if BannedReason(b) == "" {
			t.Errorf("BannedReason(%q) is empty", b)
		}
	}
	for _, ok := range []string{"make", "cargo", "go", "npm", "ls", "gofmt", "shellcheck", "bashate", "pytest", "yarn", "pnpm"} {
		if r := BannedReason(ok); r != "" {
			t.Errorf("BannedReason(%q) = %q", ok, r)
		}
	}
}

func TestBannedEntryReason(t *testing.T) {
	for _, b := range [][]string{{"npm", "exec", "x"}, {"npm", "x"}, {"go", "run", "."}, {"npm", "--silent", "install"},
		{"pnpm", "dlx", "x"}, {"yarn", "dlx"}, {"cargo", "install", "x"}, {"pip3", "install"}, {"/usr/bin/git", "status"}} {
		if BannedEntryReason(b) == "" {
			t.Errorf("BannedEntryReason(%q) is empty", b)
		}
	}
	for _, ok := range [][]string{{"make", "lint"}, {"npm", "test"}, {"npm", "run", "lint"}, {"cargo", "fmt", "--check"},
		{"go", "vet", "./..."}, {"go", "test", "./..."}, {"npm", "test", "install"}} {
		if r := BannedEntryReason(ok); r != "" {
			t.Errorf("BannedEntryReason(%q) = %q", ok, r)
		}
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{"make lint", "a 'b c' \"d\"", "a;b", "echo $(x)", `a\ b`, "\x00", "x=1 y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv, err := Split(s)
		if err != nil {
			return
		}
		if len(argv) == 0 {
			t.Fatalf("Split(%q) returned no words and no error", s)
		}
		// Quoting every word and splitting again must give the same
		// vector: the parser's words are exactly what would be executed.
		var quoted []string
		for _, a := range argv {
			quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'"'"'`)+"'")
		}
		again, err := Split(strings.Join(quoted, " "))
		if err != nil || !slices.Equal(again, argv) {
			t.Fatalf("round trip of %q: %q -> %q, %v", s, argv, again, err)
		}
	})
}
