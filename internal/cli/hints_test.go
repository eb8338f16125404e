package cli

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/shim"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi/netdtest"
	"github.com/spf13/pflag"
)

func TestVerbLine(t *testing.T) {
	for _, tc := range [][3]string{{"stop", "", "`lazaret stop`"}, {"stop", "default", "`lazaret stop`"}, {"shell", "claude", "`lazaret shell claude`"}} {
		if got := verbLine(tc[0], tc[1]); got != tc[2] {
			t.Errorf("verbLine(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

// TestShimExitIsSetup: the shim, which cannot link the CLI, exits with the
// CLI's "environment not ready" code.
func TestShimExitIsSetup(t *testing.T) {
	if shim.ExitSetup != exitSetup {
		t.Fatalf("shim exits %d, the CLI's setup code is %d", shim.ExitSetup, exitSetup)
	}
}

// printedHints returns every lazaret command line the printed hints and
// notices hold: the backquoted `lazaret …` in the string literals of the
// CLI's and the coordinator's sources (without placeholders), the denial
// notices' allow commands, and verbLine's lines, for the default profile
// and another one.
func printedHints(t *testing.T) []string {
	var hints []string
	for _, dir := range []string{".", "review", "statecmd", "doctor", "image", "../coordinator", "../coordinator/sidecar", "../coordinator/escalation"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(af, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || lit.Value[0] != '"' {
					return true
				}
				s, _ := strconv.Unquote(lit.Value)
				for _, m := range regexp.MustCompile("`(lazaret [^`]*)`").FindAllStringSubmatch(s, -1) {
					if !strings.ContainsAny(m[1], "<>…|[]") && m[1] == strings.ToLower(m[1]) && !strings.Contains(m[1], "__") {
						hints = append(hints, m[1])
					}
				}
				return true
			})
		}
	}
	for _, profile := range []string{"default", "claude"} {
		for _, ev := range []netdapi.DenialEvent{
			{Name: "registry.example.org", Dest: "dns registry.example.org"},
			{Dest: "tcp 192.0.3.20:443"}, {Dest: "udp [2001:db8::7]:443"},
			{Name: "intranet.example", Dest: "dns intranet.example -> 10.1.2.3 (private-use)"},
		} {
			line := sidecar.Notice(profile, ev)
			_, cmd, ok := strings.Cut(line, "to allow it: ")
			if !ok {
				t.Fatalf("notice without a command: %s", line)
			}
			hints = append(hints, cmd+" #run")
		}
		for _, verb := range []string{"log", "reset-branch", "shell", "stop"} {
			hints = append(hints, strings.Trim(verbLine(verb, profile), "`")+" #args")
		}
		_, _, err := allowTarget("8.8.8.8/0", false, profile)
		var he *hintError
		if !errors.As(err, &he) {
			t.Fatalf("no hint for a broad CIDR: %v", err)
		}
		m := regexp.MustCompile("`(lazaret [^`]*)`").FindStringSubmatch(he.Hint)
		hints = append(hints, m[1]+" #run")
	}
	return hints
}

// TestPrintedHintsRun: every lazaret command a hint or notice prints is
// the current syntax: it parses (verb, flags, argument count) with no
// deprecated flag, and the network ones run against a stand-in netd with
// exit 0 and nothing on stderr. The denial notice said `lazaret net allow
// -p claude NAME`, which answered with a deprecation warning.
func TestPrintedHintsRun(t *testing.T) {
	hints := printedHints(t)
	if len(hints) < 30 {
		t.Fatalf("found only %d hints: %q", len(hints), hints)
	}
	e := netEnv(t, "[profiles.claude]\nimage = \"x:1\"\n")
	for _, p := range []string{"default", "claude"} {
		netdtest.Serve(t, e.netdSocket(p))
	}
	for _, h := range hints {
		// A command a notice offers to run is run; a line in prose (a
		// verb named without its argument) must name a verb and flags.
		h, runIt := strings.CutSuffix(h, " #run")
		h, checkArgs := strings.CutSuffix(h, " #args")
		args := strings.Fields(h)[1:]
		if len(args) >= 2 && args[0] == "--backend" {
			args = args[2:]
		}
		for _, a := range args {
			if a == "-p" || a == "--profile" {
				t.Errorf("hint %q uses the deprecated --profile", h)
			}
		}
		root := newRootCmd(&globalOptions{io: IO{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}})
		cmd, rest, err := root.Find(args)
		if err == nil {
			err = cmd.ParseFlags(rest)
		}
		if errors.Is(err, pflag.ErrHelp) {
			err = nil
		}
		if err == nil && cmd.Args != nil && (runIt || checkArgs) {
			err = cmd.Args(cmd, cmd.Flags().Args())
		}
		if err != nil || (cmd == root && len(args) > 0 && !strings.HasPrefix(args[0], "-")) {
			t.Errorf("hint %q does not parse: %v", h, err)
			continue
		}
		if runIt {
			out, errOut, code := e.run(args...)
			if code != 0 || strings.Contains(errOut, "deprecated") || strings.Contains(errOut, "lazaret: ") && !strings.Contains(errOut, "not in the audit trail") {
				t.Errorf("hint %q: exit %d\n%s%s", h, code, out, errOut)
			}
		}
	}
}
