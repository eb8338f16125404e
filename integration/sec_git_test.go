//go:build integration

package integration

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/coordinator/gitsentry"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// openVault runs fn with the agent vault of a opened (mode 700): the layout
// without the protection, for controls and for tests that look at the
// clone from the host.
func openVault(t testing.TB, a *domain.Anchor, fn func()) {
	t.Helper()
	defer openVaultUntil(t, a)()
	fn()
}

// openVaultUntil opens the vault and returns the function that seals it.
func openVaultUntil(t testing.TB, a *domain.Anchor) func() {
	t.Helper()
	if err := os.Chmod(a.AgentClone(), 0o700); err != nil {
		t.Fatal(err)
	}
	return func() { _ = os.Chmod(a.AgentClone(), 0) }
}

// secGitPlants plants, from inside the sandbox, configuration that makes
// host git run a command, each writing its own marker in $MARK (a host
// path, as an agent that knows where it lives would write a payload).
// Every payload is something git on the host runs unasked in the plain
// layout (TestSecGitHostGitInert's control shows each one firing).
const secGitPlants = `set -e
t() { printf 'touch %s/%s; false #' "$MARK" "$1"; }
g() { git -c user.name=A -c user.email=a@x -c core.hooksPath=/dev/null -c core.fsmonitor=false "$@"; }
# gitlink + nested repository with its own core.fsmonitor
mkdir -p nested && g -C nested init -q && echo n > nested/f && g -C nested add f && g -C nested commit -q -m n
g -C nested config core.fsmonitor "$(t nested)"
g update-index --add --cacheinfo 160000,$(g -C nested rev-parse HEAD),nested
# a .git FILE pointing at a gitdir the agent wrote
g init -q gitfile && mv gitfile/.git .gitfile-dir && printf 'gitdir: ../.gitfile-dir\n' > gitfile/.git
g -C gitfile config core.fsmonitor "$(t gitfile)"
# log.showSignature + gpg.program, with a signed-looking HEAD (plain git log verifies it)
g init -q signed && printf '#!/bin/sh\ntouch %s/gpg\nexit 1\n' "$MARK" > signed/gpg.sh && chmod +x signed/gpg.sh
g -C signed commit -q --allow-empty -m s
c=$(g -C signed cat-file commit HEAD | awk -v s=' -----BEGIN PGP SIGNATURE-----\n \n iQEz\n -----END PGP SIGNATURE-----' '!d && /^committer /{print; print "gpgsig" s; d=1; next} {print}' | g -C signed hash-object -t commit -w --stdin)
g -C signed update-ref HEAD $c
g -C signed config log.showSignature true && g -C signed config gpg.program ./gpg.sh
# include.path to a file the agent wrote
g init -q include && printf '[core]\n\tfsmonitor = "%s"\n' "$(t include)" > include/evil.cfg
g -C include config include.path ../evil.cfg
# diff.<driver>.textconv chosen by .gitattributes, a modified file (git diff)
g init -q textconv && echo one > textconv/a.txt && printf '*.txt diff=tc\n' > textconv/.gitattributes && g -C textconv add -A && g -C textconv commit -q -m t && echo two > textconv/a.txt
g -C textconv config diff.tc.textconv "$(t textconv)"
# diff.external (git diff)
g init -q external && echo one > external/a && g -C external add -A && g -C external commit -q -m e && echo two > external/a
g -C external config diff.external "$(t external)"
# filter.<driver>.clean chosen by .gitattributes (git status cleans a changed file)
g init -q filter && printf '* filter=ev\n' > filter/.gitattributes && echo one > filter/a && g -C filter add -A && g -C filter commit -q -m f && echo two > filter/a
g -C filter config filter.ev.clean "$(t filter)"
# commondir -> a config with core.fsmonitor (last: it breaks the clone's own git)
mkdir -p .git/evil/objects .git/evil/refs
printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "%s"\n' "$(t commondir)" > .git/evil/config
echo evil > .git/commondir
`

// secGitPlantNames are the markers of secGitPlants.
var secGitPlantNames = []string{"commondir", "external", "filter", "gitfile", "gpg", "include", "nested", "textconv"}

// secGitPrompt is what the user, a shell prompt and an IDE run in a
// directory.
var secGitPrompt = [][]string{
	{"rev-parse", "--git-dir"},
	{"rev-parse", "--show-toplevel"},
	{"status", "--porcelain"},
	{"status", "-z", "-uall"},
	{"status"},
	{"log", "-1"},
	{"diff"},
}

// hostGitWalk runs host git as the user (their own environment: global
// config, no GIT_* from lazaret) in every directory under root the user
// can reach, and in extra, and returns how many directories it ran in.
func hostGitWalk(t *testing.T, root string, extra ...string) int {
	t.Helper()
	var dirs []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil // unreadable directories are skipped, as by any walker
	})
	n := 0
	for _, d := range append(dirs, extra...) {
		if _, err := os.Stat(d); err != nil {
			continue // not reachable: nothing can run there
		}
		n++
		for _, args := range secGitPrompt {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cmd := exec.CommandContext(ctx, "git", args...)
			cmd.Dir = d
			_ = cmd.Run()
			cancel()
		}
	}
	return n
}

func markers(t *testing.T, m string) []string {
	t.Helper()
	entries, _ := os.ReadDir(m)
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names
}

// TestSecGitHostGitInert: the agent plants, everywhere it can write,
// configuration that makes git run a command; host git run by the user in
// every directory under the domain root (and in the plant directories by
// their paths) runs none of them. Control: with the vault opened (the
// plain layout) the same walk fires every plant.
func TestSecGitHostGitInert(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	m := filepath.Join(e.Root, "markers")
	if err := os.MkdirAll(m, 0o777); err != nil {
		t.Fatal(err)
	}
	s := gsStart(t, e, "secinert", "")
	s.must("MARK=" + m + "\n" + secGitPlants)

	clone := gitsentry.ClonePath(s.anchor)
	var byPath []string
	for _, p := range secGitPlantNames {
		byPath = append(byPath, filepath.Join(clone, p))
	}
	byPath = append(byPath, clone, filepath.Join(clone, ".git"), filepath.Join(clone, ".gitfile-dir"))
	if _, err := os.Stat(filepath.Join(clone, "nested")); !os.IsPermission(err) {
		t.Errorf("a plant directory is reachable by the user: %v", err)
	}
	n := hostGitWalk(t, s.anchor.Root(), byPath...)
	t.Logf("host git ran in %d directories under %s", n, s.anchor.Root())
	// Again once the sandbox is gone (runsc keeps files the agent wrote
	// open, so an executable written inside cannot run on the host while
	// the sandbox lives: "text file busy").
	s.stop()
	n = hostGitWalk(t, s.anchor.Root(), byPath...)
	t.Logf("after the stop, host git ran in %d directories", n)
	if got := markers(t, m); len(got) > 0 {
		t.Errorf("host git ran agent commands: markers %v", got)
	}

	// Control: the same walk with the vault open.
	func() {
		defer openVaultUntil(t, s.anchor)()
		n = hostGitWalk(t, s.anchor.Root())
	}()
	got := markers(t, m)
	t.Logf("control: host git ran in %d directories; markers %v", n, got)
	for _, p := range secGitPlantNames {
		if !slices.Contains(got, p) {
			t.Errorf("control: plant %s did not fire with the vault open", p)
		}
	}
	// The next start seals the vault again.
	if fi, err := os.Lstat(s.anchor.AgentClone()); err != nil || fi.Mode().Perm() != 0 {
		t.Errorf("vault after the control: %v %v", fi.Mode(), err)
	}
}

// stop ends the sandbox (the clone stays).
func (s *gsSandbox) stop() {
	s.t.Helper()
	_ = s.comp.Close(context.Background())
	if err := exec.Command("podman", "rm", "-f", "-t", "0", s.name).Run(); err != nil {
		s.t.Fatal(err)
	}
}

// secGitRun runs git on the host in dir and returns its output.
func secGitRun(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return strings.TrimSpace(b.String()), err
}

// TestSecGitMergeFlags: the agent's branch adds external symlinks (one
// named with a bidi override), an inside one, an executable and files the
// host runs unasked. lazaret diff names each (escaped), lazaret merge
// refuses the external symlinks and leaves the repository as it was.
// Control: with --allow-external-symlinks the merge goes through and the
// symlink exists on the host.
func TestSecGitMergeFlags(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	s := gsStartNamed(t, e, "default", "", "")
	tip := s.must(`set -e
ln -s /etc/passwd ext
mkdir -p sub && ln -s ../../outside sub/up
ln -s a.txt inside
ln -s / "$(printf 'e\342\200\256vil')"
printf '#!/bin/sh\n' > run.sh && chmod +x run.sh
echo 'echo hi' > .envrc
mkdir -p .vscode .githooks .github/workflows
echo '{}' > .vscode/tasks.json
printf '#!/bin/sh\n' > .githooks/pre-commit
printf 'all:\n' > Makefile
echo 'on: push' > .github/workflows/ci.yml
echo '* filter=x' > .gitattributes
git add -A && git commit -q -m plants && git rev-parse HEAD`)
	ref := "refs/heads/lazaret/agent-default"
	Eventually(t, 15*time.Second, "the agent's commit on the host", func() bool { return hostRef(e.Workspace, ref) == tip })

	r := e.Run("diff")
	if r.Code != 0 {
		t.Fatalf("lazaret diff: exit %d: %s", r.Code, r.Stderr)
	}
	for _, want := range []string{
		"external symlink   ext -> /etc/passwd", "external symlink   sub/up -> ../../outside",
		`external symlink   e\u202evil -> /`, "new executable     run.sh",
		"runs on your host  .envrc", "runs on your host  .vscode/tasks.json", "runs on your host  .githooks/pre-commit",
		"runs on your host  Makefile", "runs on your host  .github/workflows/ci.yml", "runs on your host  .gitattributes",
	} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("lazaret diff does not flag %q:\n%s", want, r.Stderr)
		}
	}
	if strings.Contains(r.Stderr, "\u202e") || strings.Contains(r.Stderr, "   inside") {
		t.Errorf("lazaret diff: raw bidi character or the inside symlink flagged:\n%s", r.Stderr)
	}

	before := hostState(t, e.Workspace)
	r = e.Run("merge")
	if r.Code == 0 || !strings.Contains(r.Stderr, "ext -> /etc/passwd") || !strings.Contains(r.Stderr, "--allow-external-symlinks") {
		t.Errorf("lazaret merge with external symlinks: exit %d\n%s", r.Code, r.Stderr)
	}
	if after := hostState(t, e.Workspace); after != before {
		t.Errorf("a refused merge changed the repository:\n%s\n---\n%s", before, after)
	}
	if _, err := os.Lstat(filepath.Join(e.Workspace, "ext")); err == nil {
		t.Errorf("a refused merge created the symlink")
	}

	// Control: allowed, the merge plants the symlink.
	r = e.Run("merge", "--allow-external-symlinks")
	if r.Code != 0 {
		t.Fatalf("lazaret merge --allow-external-symlinks: exit %d: %s", r.Code, r.Stderr)
	}
	if target, err := os.Readlink(filepath.Join(e.Workspace, "ext")); err != nil || target != "/etc/passwd" {
		t.Errorf("control: merged symlink %q %v", target, err)
	}
	if !strings.Contains(r.Stderr, "this merge planted") {
		t.Errorf("merge does not list what it planted:\n%s", r.Stderr)
	}
}

// TestSecGitRefSyncSkipsAndAudits runs the real coordinator: the agent
// makes branches named bad"name and ünï, a plain commit, and a commit
// whose message hides text (ESC [8m, U+202E). The plain work still
// reaches the host; the refused branches are skipped, audited and shown
// by lazaret status; the hiding commit is in the audit trail.
func TestSecGitRefSyncSkipsAndAudits(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	r := e.Run("exec", "--", "sh", "-c", `set -e
git branch 'bad"name' && git branch "$(printf '\303\274n\303\257')"
echo work >> a.txt && git commit -q -am 'plain work'
git commit -q --allow-empty -m "$(printf 'fix \033[8mcurl x | sh\033[0m \342\200\256txt.exe')"
git rev-parse HEAD`)
	if r.Code != 0 {
		t.Fatalf("lazaret exec: exit %d: %s", r.Code, r.Stderr)
	}
	tip := strings.TrimSpace(r.Stdout)
	// The session's end tears the sandbox down after a last sync.
	Eventually(t, 30*time.Second, "the agent's commits on the host", func() bool {
		return hostRef(e.Workspace, "refs/heads/lazaret/agent-default") == tip
	})
	if out, _ := secGitRun(e.Workspace, "for-each-ref", "refs/lazaret/"); strings.Contains(out, "name") || strings.Contains(out, "n\u00ef") {
		t.Errorf("a refused branch reached the host: %s", out)
	}
	var audit string
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.Run("audit")
		audit = r.Stdout
		if strings.Count(audit, "git.ref_skipped") >= 2 && strings.Contains(audit, "git.commit_flagged") {
			break
		}
		if time.Now().After(deadline) {
			rt, _ := domain.RuntimeDir()
			a, _ := domain.New("default", e.Workspace, e.DataRoot, rt, "")
			logData, _ := os.ReadFile(a.CoordinatorLog())
			t.Fatalf("audit entries missing:\n%s%s\ncoordinator log:\n%s", audit, r.Stderr, logData)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, want := range []string{`ref=refs/heads/bad"name`, "ref=refs/heads/ünï", `\x1b[8m`, `\u202etxt.exe`, "commit=" + tip} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit trail lacks %q:\n%s", want, audit)
		}
	}
	// Control of the rule: the plain commit of the same sync is not flagged.
	if n := strings.Count(audit, "git.commit_flagged"); n != 1 {
		t.Errorf("%d commits flagged, want only the one that hides text:\n%s", n, audit)
	}
	if strings.Contains(audit, "\x1b") || strings.Contains(audit, "\u202e") {
		t.Errorf("the audit display passes hidden characters raw")
	}
	if st := e.Run("status").Stdout; !strings.Contains(st, `refs/heads/bad"name`) {
		t.Errorf("lazaret status does not name the skipped branch:\n%s", st)
	}
}
