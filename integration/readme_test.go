//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/cli/image"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// The README's configuration and quick start, run as they are written:
// docs that cannot rot (issue 40 items 2 and 6). Only what cannot run here
// is swapped: the agent image (built from Debian's mirror in minutes) for
// the local default image, data_root for the test's, the API keys for
// dummies.

// readmeBlocks returns the bodies of README.md's ```lang fences, in order.
func readmeBlocks(t *testing.T, lang string) []string {
	t.Helper()
	// The test binary runs from a staging directory: the README is
	// found beside this source file (scripts/integration builds it from
	// the tree under test).
	_, src, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no source path")
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(src), "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```"+lang:
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("README.md has no ```%s block", lang)
	}
	return blocks
}

var readmeDataRoot = regexp.MustCompile(`(?m)^data_root\s*=.*$`)

// readmeConfig writes the README's TOML blocks, joined, as e's
// configuration with the test's data_root and the local default image for
// the agent image, then extra.
func readmeConfig(t *testing.T, e *Env, blocks []string, extra string) {
	t.Helper()
	text := strings.Join(blocks, "\n")
	if n := len(readmeDataRoot.FindAllString(text, -1)); n != 1 {
		t.Fatalf("README configuration has %d data_root lines, want 1:\n%s", n, text)
	}
	text = readmeDataRoot.ReplaceAllString(text, "data_root = "+strconvQuote(e.DataRoot))
	// The image the quick start's `lazaret image build agent` builds.
	if !strings.Contains(text, `"`+image.AgentImage+`"`) {
		t.Fatalf("README configuration does not use %s, which the quick start builds", image.AgentImage)
	}
	text = strings.ReplaceAll(text, `"`+image.AgentImage+`"`, `"`+config.DefaultImage+`"`)
	if err := os.WriteFile(e.Config, []byte(text+"\n"+extra), 0o600); err != nil {
		t.Fatal(err)
	}
}

func strconvQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// readmeInstall builds a one-file package with dpkg-deb in the sandbox and
// installs it with dpkg; readmeCheck is what a later start finds of it.
const (
	readmeInstall = `set -e
d=$(mktemp -d); mkdir -p $d/p/DEBIAN $d/p/usr/bin
printf 'Package: lzreadme\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: lazaret README test\n' > $d/p/DEBIAN/control
printf '#!/bin/sh\necho readme-ok\n' > $d/p/usr/bin/lzreadme; chmod 755 $d/p/usr/bin/lzreadme
dpkg-deb --root-owner-group --build $d/p /tmp/lzreadme.deb >/dev/null
dpkg -i /tmp/lzreadme.deb >/dev/null
dpkg -s lzreadme | grep '^Status:'
`
	readmeCheck = `lzreadme; dpkg -s lzreadme 2>&1 | grep -E '^Status:|not installed'`
	readmeKnown = "readme-ok\nStatus: install ok installed\n"
)

// readmeKeyCheck fails in the sandbox when VAR is not a placeholder or the
// host's value shows anywhere in the environment.
func readmeKeyCheck(v, secret string) string {
	return `case "$` + v + `" in lzph-*) ;; *) echo "` + v + ` is not a placeholder: $` + v + `"; exit 1 ;; esac
if env | grep -q '` + secret + `'; then echo "the key reached the sandbox"; exit 1; fi
`
}

// TestReadmeQuickStart runs the README's agent quick start line by line
// (the agent image swapped for the local one) with its configuration
// block as it is: config check says ok, the key stays out of the sandbox
// (a placeholder inside), and a package installed with dpkg in `lazaret
// shell claude` is still installed, to dpkg too, after lazaret stop and a
// new start. Then the profiles of the second block (Codex CLI, aider) get
// their placeholders.
func TestReadmeQuickStart(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	toml := readmeBlocks(t, "toml")
	if len(toml) != 2 {
		t.Fatalf("README has %d toml blocks; this test runs 2 (claude; codex and aider)", len(toml))
	}
	readmeConfig(t, e, toml[:1], "")
	const secret = "sk-ant-readme-test-3b1f0c"
	const openai = "sk-openai-readme-test-9d2e7a"

	var quick string
	for _, b := range readmeBlocks(t, "sh") {
		if strings.Contains(b, "lazaret image build agent") {
			quick = b
		}
	}
	if quick == "" {
		t.Fatal("README has no quick start block with `lazaret image build agent`")
	}
	ran := 0
	for _, line := range strings.Split(quick, "\n") {
		cmd := strings.TrimSpace(line)
		if i := strings.Index(cmd, "  #"); i >= 0 {
			cmd = strings.TrimSpace(cmd[:i])
		}
		switch {
		case cmd == "" || strings.HasPrefix(cmd, "#"):
		case cmd == "lazaret image build agent":
			// Built for the swapped image: the recipe exists, and the
			// configuration names its image (readmeConfig checked).
			if !slices.Contains(image.Names(), "agent") {
				t.Error("lazaret image build has no agent recipe")
			}
		case strings.HasPrefix(cmd, "$EDITOR ~/.config/lazaret/config.toml"):
			// readmeConfig wrote the block.
		case strings.HasPrefix(cmd, "export ANTHROPIC_API_KEY="):
			e.ExtraEnv = append(e.ExtraEnv, "ANTHROPIC_API_KEY="+secret)
		case cmd == "lazaret config check":
			out := e.MustRun("config", "check")
			if !strings.HasPrefix(out, "ok: "+e.Config) || strings.Contains(out, "profile claude:") {
				t.Errorf("config check: %q (the README lists the default persistent_dirs: nothing to add)", out)
			}
		case strings.HasPrefix(cmd, "cd "):
			// gsRepo made the workspace a repository with a commit.
		case cmd == "lazaret shell claude":
			r := e.RunStdin(readmeKeyCheck("ANTHROPIC_API_KEY", secret)+readmeInstall, "shell", "claude")
			if r.Code != 0 || r.Stdout != "Status: install ok installed\n" {
				t.Fatalf("lazaret shell claude: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
			}
			if strings.Contains(r.Stderr, "persisting") {
				t.Errorf("a start of a profile listing the package database says it adds it: %s", r.Stderr)
			}
		default:
			t.Fatalf("README quick start line %q: this test does not run it; teach it or change the README", cmd)
		}
		ran++
	}
	if ran < 5 {
		t.Fatalf("ran %d lines of the quick start:\n%s", ran, quick)
	}

	// Stop, start: the package is still there, to dpkg too.
	e.MustRun("stop", "claude")
	if r := e.RunStdin(readmeCheck, "shell", "claude"); r.Stdout != readmeKnown {
		t.Fatalf("after a restart: %q (want %q)\nstderr: %s", r.Stdout, readmeKnown, r.Stderr)
	}
	if st := e.MustRun("state", "claude"); !strings.Contains(st, "/var/lib/dpkg") || !strings.Contains(st, "/var/lib/apt") {
		t.Errorf("lazaret state claude: %s", st)
	}
	e.MustRun("stop", "claude")

	// The second block: codex and aider, with both keys.
	readmeConfig(t, e, toml, "")
	e.ExtraEnv = append(e.ExtraEnv, "OPENAI_API_KEY="+openai)
	if out := e.MustRun("config", "check"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("config check with both blocks: %q", out)
	}
	e.MustRun("exec", "codex", "--", "sh", "-c", readmeKeyCheck("OPENAI_API_KEY", openai))
	e.MustRun("exec", "aider", "--", "sh", "-c", readmeKeyCheck("OPENAI_API_KEY", openai)+readmeKeyCheck("ANTHROPIC_API_KEY", secret))
	e.MustRun("stop", "--all")
}

// TestReadmeUsrOnly: the README's configuration as it was (persistent_dirs
// = ["/usr"]) keeps the package database now, and says so at start, in
// `lazaret state` and in `config check`. Control: the same profile with
// persist_package_db = false forgets the package after a restart, as
// every /usr-only profile did (so this test fails on that behaviour).
func TestReadmeUsrOnly(t *testing.T) {
	e := NewEnv(t)
	e.ExtraEnv = append(e.ExtraEnv, "ANTHROPIC_API_KEY=sk-ant-readme-test-3b1f0c")
	block := readmeBlocks(t, "toml")[0]
	old := strings.Replace(block, `persistent_dirs = ["/usr", "/var/lib/dpkg", "/var/lib/apt"]`, `persistent_dirs = ["/usr"]`, 1)
	if old == block {
		t.Fatal("README's claude profile has no persistent_dirs line showing the default")
	}
	extra := "[profiles.imagedb]\nimage = \"" + config.DefaultImage + "\"\npersistent_dirs = [\"/usr\"]\npersist_package_db = false\n"
	readmeConfig(t, e, []string{old}, extra)

	const note = "persisting /var/lib/dpkg and /var/lib/apt with /usr (the package database that describes it"
	if out := e.MustRun("config", "check"); !strings.Contains(out, "\nprofile claude: "+note) || !strings.Contains(out, "\nprofile imagedb: /usr persists without its package database") {
		t.Errorf("config check: %q", out)
	}
	r := e.Run("exec", "claude", "--", "bash", "-c", readmeInstall)
	if r.Code != 0 {
		t.Fatalf("install: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if n := strings.Count(r.Stderr, "lazaret: profile claude: "+note); n != 1 {
		t.Errorf("the start said %d times that it persists the database:\n%s", n, r.Stderr)
	}
	e.MustRun("stop", "claude")
	if out := e.MustRun("exec", "claude", "--", "sh", "-c", readmeCheck); out != readmeKnown {
		t.Errorf("/usr alone (the old README) after a restart: %q, want %q", out, readmeKnown)
	}
	if st := e.MustRun("state", "claude"); !strings.Contains(st, note) || !strings.Contains(st, "/var/lib/dpkg") {
		t.Errorf("lazaret state claude: %s", st)
	}
	e.MustRun("stop", "claude")

	// Control: without the database, dpkg forgets what /usr still holds.
	e.MustRun("exec", "imagedb", "--", "bash", "-c", readmeInstall)
	e.MustRun("stop", "imagedb")
	out := e.Run("exec", "imagedb", "--", "sh", "-c", readmeCheck).Stdout
	if !strings.HasPrefix(out, "readme-ok\n") || !strings.Contains(out, "not installed") {
		t.Errorf("control (persist_package_db = false): %q, want the file but dpkg not knowing it", out)
	}
	e.MustRun("stop", "--all")
}
