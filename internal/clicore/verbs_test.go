package clicore_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/cli"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/kubecli"
)

// backends are both CLIs, each with how the user runs it.
var backends = []struct {
	name, prefix string
	run          func([]string, clicore.IO) int
}{
	{"lazaret", "lazaret", cli.Run},
	{"lazaret-kube", "lazaret --backend kubernetes", kubecli.Run},
}

// TestSharedVerbFlagParsing runs every verb both backends implement
// themselves (the review verbs and audit lazaret-kube hands to the local
// CLI are the local CLI's) through both CLIs' flag and argument parsing:
// a bad flag, a flag's nearest name, too many arguments, a missing
// command, an unknown verb. Each must fail the same way on both: exit 2,
// the same message, and a hint naming that verb's help as the user runs
// it. (lazaret-kube answered the argument and verb errors with exit 1 and
// no hint before the shared core.)
func TestSharedVerbFlagParsing(t *testing.T) {
	t.Setenv("LAZARET_BACKEND", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[profiles.dev]\nimage = \"localhost/x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		msg  string
		help string // the verb whose help the hint names ("" the root)
	}{
		{[]string{"frob"}, `unknown command "frob" for "PREFIX"`, ""},
		{[]string{"sotp"}, `unknown command "sotp" for "PREFIX"; did you mean stop?`, ""},
		{[]string{"exec"}, "exec: no command", "exec"},
		{[]string{"exec", "--"}, "exec: no command", "exec"},
		{[]string{"shell", "a", "b"}, "accepts at most 1 arg(s), received 2", "shell"},
		{[]string{"status", "a", "b"}, "accepts at most 1 arg(s), received 2", "status"},
		{[]string{"stop", "a", "b"}, "accepts at most 1 arg(s), received 2", "stop"},
		{[]string{"ps", "a"}, `unknown command "a" for "PREFIX ps"`, "ps"},
		{[]string{"state", "a", "b"}, "accepts at most 1 arg(s), received 2", "state"},
		{[]string{"stop", "--al"}, "unknown flag: --al; did you mean --all?", "stop"},
		{[]string{"--workspac", "x", "status"}, "unknown flag: --workspac; did you mean --workspace?", "status"},
	}
	for _, verb := range append(sharedVerbs(), "doctor") {
		cases = append(cases, struct {
			args      []string
			msg, help string
		}{[]string{verb, "--no-such-flag"}, "unknown flag: --no-such-flag", verb})
	}
	for _, c := range cases {
		for _, b := range backends {
			t.Run(b.name+"/"+strings.Join(c.args, "_"), func(t *testing.T) {
				var out, errOut bytes.Buffer
				args := append([]string{b.name, "--config", cfg}, c.args...)
				code := b.run(args, clicore.IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
				help := strings.TrimSpace(b.prefix + " " + c.help)
				want := "lazaret: " + strings.ReplaceAll(c.msg, "PREFIX", b.prefix) + "\nhint: run `" + help + " --help` for usage\n"
				if code != 2 || errOut.String() != want {
					t.Fatalf("exit %d, stderr\n%s\nwant exit 2, stderr\n%s", code, errOut.String(), want)
				}
			})
		}
	}
}

// TestSharedVerbHelp: every shared verb's --help parses on both CLIs.
// Each verb of clicore.Verbs shows the table's usage line on both.
func TestSharedVerbHelp(t *testing.T) {
	t.Setenv("LAZARET_BACKEND", "")
	for _, verb := range append(sharedVerbs(), "doctor") {
		for _, b := range backends {
			var out, errOut bytes.Buffer
			if code := b.run([]string{b.name, verb, "--help"}, clicore.IO{Out: &out, ErrOut: &errOut}); code != 0 || !strings.Contains(out.String(), "--workspace") {
				t.Errorf("%s %s --help: exit %d, %q %q", b.name, verb, code, out.String(), errOut.String())
			}
			if v, ok := clicore.Verbs[verb]; ok && !strings.Contains(out.String(), " "+v.Use+" [flags]") && !strings.Contains(out.String(), " "+v.Use+"\n") {
				t.Errorf("%s %s --help does not show the shared usage %q:\n%s", b.name, verb, v.Use, out.String())
			}
		}
	}
}

// sharedVerbs are clicore.Verbs' names, sorted.
func sharedVerbs() []string {
	var vs []string
	for v := range clicore.Verbs {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

// TestSharedConfigErrors: a configuration error, a refused one and an
// unknown profile are told the same way on both CLIs: the same exit code,
// message and hint (lazaret-kube had hints of its own before ConfigHint).
func TestSharedConfigErrors(t *testing.T) {
	t.Setenv("LAZARET_BACKEND", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.toml", "[profiles.dev]\nimage = \"localhost/x\"\nmemory = \"lots\"\n")
	good := write("good.toml", "[profiles.dev]\nimage = \"localhost/x\"\n")
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"bad key", []string{"--config", bad, "status", "dev"}, 4},
		{"unknown profile", []string{"--config", good, "status", "nope"}, 2},
	} {
		var got []string
		var codes []int
		for _, b := range backends {
			var out, errOut bytes.Buffer
			code := b.run(append([]string{b.name}, c.args...), clicore.IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			got, codes = append(got, errOut.String()), append(codes, code)
		}
		if codes[0] != c.code || codes[1] != c.code || got[0] != got[1] || !strings.Contains(got[0], "\nhint: ") {
			t.Errorf("%s: lazaret exit %d:\n%s\nlazaret-kube exit %d:\n%s", c.name, codes[0], got[0], codes[1], got[1])
		}
	}
}
