//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/gitsentry"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/insandbox/fsmonitor"
	"github.com/lazaret-dev/lazaret/internal/insandbox/fsmonitor/fsmtest"
)

// The Git Sentry tests start the sandbox container themselves through
// internal/adapter/podman, with exactly the spec changes the gitsentry Component
// makes (its Prepare/Started/Close), under the pinned runsc.

const gsImage = "localhost/lazaret-default:latest"

// gsGit runs host git in dir with a fixed identity and fails the test on
// error.
func gsGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=Host", "-c", "user.email=host@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v in %s: %v: %s", args, dir, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// gsRepo makes a host repository with two commits in dir.
func gsRepo(t testing.TB, dir string) {
	t.Helper()
	gsGit(t, dir, "init", "-q")
	gsGit(t, dir, "config", "user.name", "Agent Smith")
	gsGit(t, dir, "config", "user.email", "agent@example.com")
	os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644)
	gsGit(t, dir, "add", ".")
	gsGit(t, dir, "commit", "-q", "-m", "first")
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644)
	gsGit(t, dir, "add", ".")
	gsGit(t, dir, "commit", "-q", "-m", "second")
}

// gsSandbox is a running sandbox with the Git Sentry component.
type gsSandbox struct {
	t      testing.TB
	anchor *domain.Anchor
	comp   *gitsentry.Component
	name   string
}

func gsRuntime(t testing.TB) string {
	if p := os.Getenv("LAZARET_RUNSC"); p != "" {
		return p
	}
	return "/usr/local/lib/lazaret/runsc"
}

// gsStart prepares the component for (profile, workspace), starts the
// container and the ref sync.
func gsStart(t testing.TB, e *Env, profile, gitMode string, extraMounts ...podman.Mount) *gsSandbox {
	return gsStartNamed(t, e, profile, gitMode, "-gs", extraMounts...)
}

// gsStartNamed is gsStart with the container named <a.Container()><suffix>;
// an empty suffix gives the name lazaret itself uses (for `lazaret diff
// --uncommitted`).
func gsStartNamed(t testing.TB, e *Env, profile, gitMode, suffix string, extraMounts ...podman.Mount) *gsSandbox {
	t.Helper()
	ctx := context.Background()
	rt, err := domain.RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	a, err := domain.New(profile, e.Workspace, e.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: gsLogLevel()}))
	pc := &podman.Client{Log: log}
	comp := gitsentry.New(a, gitMode, pc, log)
	// The fsmonitor as lazaret installs it (beside the other binaries).
	if bin := filepath.Join(os.Getenv("LAZARET_BIN"), "lazaret-fsmonitor"); os.Getenv("LAZARET_BIN") != "" {
		comp.FSMonitor = bin
	}
	var notices bytes.Buffer
	comp.Notices = &notices
	spec := &podman.ContainerSpec{
		Name:        a.Container() + suffix,
		Image:       gsImage,
		Runtime:     gsRuntime(t),
		Labels:      map[string]string{domain.LabelKey: a.Hash, "lazaret.test": "gitsentry"},
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL"},
		SecurityOpt: []string{"no-new-privileges"},
		Network:     "none",
		Workdir:     "/workspace",
		ExtraArgs:   gsRuntimeFlags(),
		Command:     []string{"sleep", "infinity"},
	}
	if err := comp.Prepare(ctx, spec); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if comp.Mode() == gitrepo.ModeDirect {
		spec.Mounts = append([]podman.Mount{{Type: "bind", Source: a.Workspace, Target: "/workspace", Options: []string{"z"}}}, spec.Mounts...)
	}
	spec.Mounts = append(spec.Mounts, extraMounts...)
	inv, err := pc.RunArgs(spec)
	if err != nil {
		t.Fatal(err)
	}
	s := &gsSandbox{t: t, anchor: a, comp: comp, name: spec.Name}
	t.Cleanup(func() {
		_ = comp.Close(context.Background())
		_ = exec.Command("podman", "rm", "-f", "-t", "0", spec.Name).Run()
	})
	if _, err := pc.OutputInvocation(ctx, inv); err != nil {
		t.Fatalf("podman run: %v", err)
	}
	if err := comp.Started(ctx, spec.Name); err != nil {
		t.Fatalf("Started: %v", err)
	}
	if notices.Len() > 0 {
		t.Logf("notices: %s", notices.String())
	}
	return s
}

// gsRuntimeFlags are the runsc flags of the test sandboxes; extra ones
// come from LAZARET_TEST_RUNSC_FLAGS (space separated, e.g.
// "file-access-mounts=exclusive" to check that the Git Sentry's mount
// hints keep everything correct under exclusive file access).
func gsRuntimeFlags() []string {
	args := []string{"--runtime-flag", "ignore-cgroups"}
	for _, f := range strings.Fields(os.Getenv("LAZARET_TEST_RUNSC_FLAGS")) {
		args = append(args, "--runtime-flag", f)
	}
	return args
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// sh runs a shell script in the sandbox.
func (s *gsSandbox) sh(script string) (stdout, stderr string, code int) {
	s.t.Helper()
	cmd := exec.Command("podman", "exec", "-e", "GIT_AUTHOR_DATE", "-w", "/workspace", s.name, "sh", "-c", script)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("podman exec: %v", err)
	}
	return o.String(), e.String(), code
}

// must runs a script that has to succeed and returns its trimmed stdout.
func (s *gsSandbox) must(script string) string {
	s.t.Helper()
	out, errOut, code := s.sh(script)
	if code != 0 {
		s.t.Fatalf("in sandbox: %q: exit %d\nstdout: %s\nstderr: %s", script, code, out, errOut)
	}
	return strings.TrimSpace(out)
}

// fails runs a script that has to fail with a message containing want.
func (s *gsSandbox) fails(script, want string) {
	s.t.Helper()
	out, errOut, code := s.sh(script)
	if code == 0 || !strings.Contains(out+errOut, want) {
		s.t.Errorf("in sandbox: %q: exit %d, output %q; want a failure with %q", script, code, out+errOut, want)
	}
}

// hostState is everything of the host repository that must not change:
// HEAD, the index, the working tree, and every ref outside lazaret/.
func hostState(t testing.TB, ws string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []string{".git/HEAD", ".git/index"} {
		data, err := os.ReadFile(filepath.Join(ws, f))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s %s\n", f, hex.EncodeToString(sum[:]))
	}
	var files []string
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			data, _ := os.ReadFile(p)
			sum := sha256.Sum256(data)
			files = append(files, fmt.Sprintf("%s %s", p, hex.EncodeToString(sum[:])))
		}
		return nil
	})
	sort.Strings(files)
	b.WriteString(strings.Join(files, "\n") + "\n")
	for _, l := range strings.Split(gsGit(t, ws, "for-each-ref", "--format=%(objectname) %(refname) %(symref)"), "\n") {
		if !strings.Contains(l, " refs/heads/lazaret/") && !strings.Contains(l, " refs/lazaret/") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// hostRef reads a host ref (loose, as update-ref writes it) or "".
func hostRef(ws, ref string) string {
	data, err := os.ReadFile(filepath.Join(ws, ".git", ref))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func TestGitSentryMountBoundary(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	s := gsStart(t, e, "gsbound", "")
	clone := gitsentry.ClonePath(s.anchor)

	// The config: read-only file mount.
	s.fails("echo x >> /workspace/.git/config", "Read-only file system")
	s.fails("rm /workspace/.git/config", "busy")
	s.fails("mv /workspace/.git/config /workspace/.git/config2", "busy")
	// .git is its own mount point.
	s.fails("mv /workspace/.git /workspace/g2", "")
	if _, _, code := s.sh("test -d /workspace/.git/objects && test ! -e /workspace/g2"); code != 0 {
		t.Errorf(".git moved")
	}
	// The host repository is read-only.
	s.fails("touch /run/lazaret/host.git/config.evil", "Read-only file system")
	// Hooks land on a tmpfs, never on the host.
	s.must("printf '#!/bin/sh\\ntouch /tmp/x\\n' > /workspace/.git/hooks/post-commit && chmod +x /workspace/.git/hooks/post-commit")
	openVault(t, s.anchor, func() {
		if _, err := os.Stat(filepath.Join(clone, ".git", "hooks", "post-commit")); err == nil {
			t.Errorf("a hook written in the sandbox appeared on the host")
		} else if !os.IsNotExist(err) {
			t.Errorf("stat of the clone's hook: %v", err)
		}
	})

	// Real git works.
	s.must("git status --short")
	s.must("echo four >> a.txt && git add a.txt && git commit -q -m 'agent: four'")
	s.must("git checkout -q -b side && echo s > s.txt && git add s.txt && git commit -q -m side && git checkout -q lazaret/agent-gsbound")
	s.must("echo wip >> README && git stash -q && git stash pop -q && git checkout -q -- README")
	s.must("echo five >> a.txt && git commit -qam five && echo six >> a.txt && git commit -qam six")
	s.must("GIT_SEQUENCE_EDITOR=true git rebase -q -i HEAD~2")
	s.must("git -c sequence.editor=\"sed -i '2s/^pick/fixup/'\" rebase -q -i HEAD~2 && test \"$(git log -1 --format=%s)\" = five")

	// A host-side `git config` (lock + rename of .git/config) is seen at
	// once, and the sandbox's config stays read-only.
	gsGit(t, e.Workspace, "config", "user.name", "Renamed Host")
	if got := s.must("git config user.name"); got != "Renamed Host" {
		t.Errorf("sandbox sees user.name %q after the host changed it", got)
	}
	s.fails("echo x >> /workspace/.git/config", "Read-only file system")
	s.fails("git config core.fsmonitor 'touch /tmp/m'", "")
	s.fails("echo '[core] fsmonitor = x' >> /run/lazaret/host.git/config", "Read-only file system")
}

// TestGitSentryMountBoundaryControl is the positive control of the
// boundary test: the naive layout (the clone's .git as a plain directory
// of the workspace mount, only the config file read-only) lets the same
// attacks through.
func TestGitSentryMountBoundaryControl(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	name := "lazaret-gitsentry-naive-" + strconv.Itoa(os.Getpid())
	defer exec.Command("podman", "rm", "-f", "-t", "0", name).Run()
	out, err := exec.Command("podman", "run", "-d", "--replace", "--name", name, "--runtime", gsRuntime(t),
		"--runtime-flag", "ignore-cgroups", "--network", "none",
		"--mount", "type=bind,source="+e.Workspace+",destination=/workspace",
		"--mount", "type=bind,source="+e.Workspace+"/.git/config,destination=/workspace/.git/config,readonly=true",
		gsImage, "sleep", "infinity").CombinedOutput()
	if err != nil {
		t.Fatalf("podman run: %v: %s", err, out)
	}
	run := func(script string) error {
		return exec.Command("podman", "exec", name, "sh", "-c", script).Run()
	}
	if err := run("printf '#!/bin/sh\\n' > /workspace/.git/hooks/post-commit"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.Workspace, ".git", "hooks", "post-commit")); err != nil {
		t.Errorf("control: a hook written in the naive layout did not reach the host: %v", err)
	}
	if err := run("mv /workspace/.git /workspace/g2 && mv /workspace/g2 /workspace/.git"); err != nil {
		t.Errorf("control: renaming .git failed in the naive layout: %v", err)
	}
}

func TestGitSentryRefSyncAndHostUntouched(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	gsGit(t, e.Workspace, "branch", "feature")
	gsGit(t, e.Workspace, "tag", "v1")
	os.WriteFile(filepath.Join(e.Workspace, "untracked.txt"), []byte("mine\n"), 0o644)
	os.WriteFile(filepath.Join(e.Workspace, "a.txt"), []byte("host edit\n"), 0o644)
	before := hostState(t, e.Workspace)

	s := gsStart(t, e, "gssync", "")
	ref := "refs/heads/lazaret/agent-gssync"
	waitRef := func(ref, want string) {
		t.Helper()
		Eventually(t, 10*time.Second, ref+" = "+want, func() bool { return hostRef(e.Workspace, ref) == want })
	}
	// The clone has the host's committed state, not the uncommitted edit.
	if got := s.must("cat a.txt"); got != "one\ntwo\nthree" {
		t.Errorf("clone a.txt = %q", got)
	}
	c1 := s.must("echo agent > agent.txt && git add agent.txt && git commit -q -m 'agent 1' && git rev-parse HEAD")
	waitRef(ref, c1)
	side := s.must("git branch side && git checkout -q -b exp && git commit -q --allow-empty -m exp && git rev-parse HEAD && git checkout -q lazaret/agent-gssync")
	waitRef("refs/lazaret/gssync/heads/exp", side)
	waitRef("refs/lazaret/gssync/heads/side", c1)
	// A rewrite: the host ref moves, the old tip stays in the reflog.
	c2 := s.must("git reset -q --hard HEAD~1 && git commit -q --allow-empty -m 'agent 2' && git rev-parse HEAD")
	waitRef(ref, c2)
	if reflog := gsGit(t, e.Workspace, "reflog", "show", "--format=%H", ref); !strings.Contains(reflog, c1) {
		t.Errorf("old tip %s not in the reflog of %s: %s", c1, ref, reflog)
	}
	s.must("git branch -D side && git gc -q --prune=now")
	Eventually(t, 10*time.Second, "side deleted on the host", func() bool {
		return hostRef(e.Workspace, "refs/lazaret/gssync/heads/side") == ""
	})
	c3 := s.must("git commit -q --allow-empty -m 'after gc' && git rev-parse HEAD")
	waitRef(ref, c3)
	gsGit(t, e.Workspace, "fsck", "--no-dangling", "--connectivity-only")
	if got := gsGit(t, e.Workspace, "log", "-1", "--format=%s", "lazaret/agent-gssync"); got != "after gc" {
		t.Errorf("host log of the agent branch: %q", got)
	}
	if after := hostState(t, e.Workspace); after != before {
		t.Errorf("host repository changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Commit → host latency, median of 20 (reported, not asserted).
	var lat []time.Duration
	for i := 0; i < 20; i++ {
		out := s.must("git commit -q --allow-empty -m 'lat " + strconv.Itoa(i) + "' && git rev-parse HEAD && date +%s.%N")
		oid, ts, _ := strings.Cut(out, "\n")
		sec, _ := strconv.ParseFloat(ts, 64)
		committed := time.Unix(0, int64(sec*1e9))
		deadline := time.Now().Add(10 * time.Second)
		for hostRef(e.Workspace, ref) != oid && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		if hostRef(e.Workspace, ref) != oid {
			t.Fatalf("commit %d never reached the host", i)
		}
		lat = append(lat, time.Since(committed))
	}
	slices.Sort(lat)
	t.Logf("GITSENTRY_LATENCY commit→host over 20 commits: median %v, min %v, max %v", lat[10], lat[0], lat[19])
}

// TestGitSentryHostRunsNoAgentCommand plants, everywhere the agent can
// write, configuration and hooks that would run a command on the host,
// then runs the host-side git commands a user runs during review. No
// marker may appear. Controls: host git pointed at the clone itself (what
// the naive layout amounts to) fires the same plants.
func TestGitSentryHostRunsNoAgentCommand(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	// The user's repository runs hooks from the tree (the husky pattern).
	gsGit(t, e.Workspace, "config", "core.hooksPath", ".githooks")
	m := filepath.Join(e.Root, "markers")
	if err := os.MkdirAll(m, 0o777); err != nil {
		t.Fatal(err)
	}
	s := gsStartNamed(t, e, "default", "", "")
	ref := "refs/heads/lazaret/agent-default"
	// A command git runs through the shell; '#' drops the arguments git
	// appends.
	touch := func(name string) string { return "touch " + m + "/" + name + " #" }

	// Committed plants: hooks under core.hooksPath and attributes that
	// select filter, diff and merge drivers.
	tip := s.must(`set -e
mkdir -p .githooks
for h in pre-commit post-commit post-merge pre-merge-commit post-checkout reference-transaction post-rewrite; do
  printf '#!/bin/sh\n` + touch("hook") + `\n' > .githooks/$h; chmod +x .githooks/$h
done
printf '* filter=evil diff=evil merge=evil\n' > .gitattributes
echo agent >> a.txt
git add -A && git -c core.hooksPath=/dev/null commit -q -m 'agent work with plants'
git rev-parse HEAD`)
	Eventually(t, 10*time.Second, "agent commit on the host", func() bool { return hostRef(e.Workspace, ref) == tip })

	// An uncommitted hook under core.hooksPath, seen by --uncommitted.
	s.must(`printf '#!/bin/sh\n` + touch("hooksdir") + `\n' > .githooks/pre-commit`)
	if out := e.MustRun("diff", "--uncommitted"); !strings.Contains(out, "hooksdir") {
		t.Errorf("lazaret diff --uncommitted does not show the uncommitted hook change:\n%s", out)
	}

	// Uncommitted plants in the clone's .git and tree (the commondir plant
	// breaks the agent's own git, so it comes last).
	s.must(`set -e
printf '[core]\n\tfsmonitor = "` + touch("config-worktree") + `"\n[filter "evil"]\n\tclean = "` + touch("filter") + `"\n\tsmudge = "` + touch("filter") + `"\n' > .git/config.worktree
mkdir -p .git/info .git/modules/sub .git/evil/objects .git/evil/refs
printf '* filter=evil\n' > .git/info/attributes
printf '[core]\n\tfsmonitor = "` + touch("modules") + `"\n' > .git/modules/sub/config
printf '[core]\n\trepositoryformatversion = 1\n\tfsmonitor = "` + touch("commondir") + `"\n[extensions]\n\tworktreeConfig = true\n' > .git/evil/config
echo evil > .git/commondir
mkdir -p nested && git -C nested init -q && git -C nested config core.fsmonitor "` + touch("nested") + `"`)

	// What the user runs on the host during review.
	gsGit(t, e.Workspace, "status")
	gsGit(t, e.Workspace, "log", "-p", "lazaret/agent-default")
	gsGit(t, e.Workspace, "diff", "lazaret/agent-default")
	gsGit(t, e.Workspace, "diff", "HEAD...lazaret/agent-default")
	if out := e.MustRun("diff"); !strings.Contains(out, "+agent") {
		t.Errorf("lazaret diff does not show the agent's change:\n%s", out)
	}
	if out := e.MustRun("diff", "--stat"); !strings.Contains(out, "a.txt") {
		t.Errorf("lazaret diff --stat:\n%s", out)
	}
	if out := e.MustRun("log", "--oneline"); !strings.Contains(out, "agent work with plants") {
		t.Errorf("lazaret log:\n%s", out)
	}
	e.MustRun("merge")
	if got := gsGit(t, e.Workspace, "rev-parse", "HEAD"); got != tip {
		t.Errorf("after lazaret merge HEAD = %s, want the agent tip %s (fast-forward)", got, tip)
	}
	gsGit(t, e.Workspace, "status")
	gsGit(t, e.Workspace, "log", "-1")

	if entries, _ := os.ReadDir(m); len(entries) > 0 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Errorf("host-side git ran agent-chosen commands: markers %v", names)
	}

	// Controls: the plants are live. Host git run in the clone (what the
	// naive layout amounts to) reads the config the planted commondir
	// points to, and the planted config.worktree, and runs their fsmonitor
	// and filter; in the nested repository, its own fsmonitor.
	clone := gitsentry.ClonePath(s.anchor)
	// The vault opened (mode 700) is the layout without the protection.
	defer openVaultUntil(t, s.anchor)()
	for _, dir := range []string{clone, filepath.Join(clone, "nested")} {
		cmd := exec.Command("git", "-C", dir, "status")
		cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
		out, _ := cmd.CombinedOutput()
		entries, _ := os.ReadDir(m)
		if len(entries) == 0 {
			t.Errorf("control: host git in %s fired no plant: %s", dir, out)
		}
		for _, en := range entries {
			t.Logf("control: host git in %s fired %s", dir, en.Name())
			os.Remove(filepath.Join(m, en.Name()))
		}
	}
}

// TestGitSentryDirectMode: git_mode = "direct" mounts the host directory
// itself, its .git read-only as its own mount point: git reads work,
// writes to .git fail, and .git cannot be renamed away.
func TestGitSentryDirectMode(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	before := hostState(t, e.Workspace)
	s := gsStart(t, e, "gsdirect", "direct")
	if got := s.must("git log -1 --format=%s"); got != "second" {
		t.Errorf("git log in direct mode: %q", got)
	}
	s.must("git status --short")
	// No fsmonitor in direct mode: the user edits the tree from the host,
	// which inotify inside the sandbox never sees.
	if got := s.must("git config core.fsmonitor; ls /run/lazaret/fsmonitor 2>&1 || true"); !strings.Contains(got, "No such file") || strings.Contains(got, "lazaret-fsmonitor") {
		t.Errorf("direct mode has an fsmonitor: %q", got)
	}
	s.fails("git commit -q --allow-empty -m x", "Read-only file system")
	s.fails("echo x >> /workspace/.git/config", "Read-only file system")
	s.fails("mv /workspace/.git /workspace/g2", "")
	s.must("echo direct > direct.txt")
	if data, err := os.ReadFile(filepath.Join(e.Workspace, "direct.txt")); err != nil || string(data) != "direct\n" {
		t.Errorf("direct mode: host directory not written through: %q %v", data, err)
	}
	os.Remove(filepath.Join(e.Workspace, "direct.txt"))
	// The user edits on the host while the sandbox runs (an editor's
	// write-and-rename): the sandbox sees it at once.
	os.WriteFile(filepath.Join(e.Workspace, "b.txt.tmp"), []byte("host edit\n"), 0o644)
	os.Rename(filepath.Join(e.Workspace, "b.txt.tmp"), filepath.Join(e.Workspace, "b.txt"))
	if got := s.must("cat b.txt"); got != "host edit" {
		t.Errorf("host edit not seen in direct mode: %q", got)
	}
	os.WriteFile(filepath.Join(e.Workspace, "b.txt"), []byte("b\n"), 0o644)
	if after := hostState(t, e.Workspace); after != before {
		t.Errorf("host repository changed in direct mode:\n%s\n---\n%s", before, after)
	}
	if _, err := os.Stat(s.anchor.AgentClone()); err == nil {
		t.Errorf("direct mode made an agent clone")
	}
}

// TestGitSentryWorktree: the workspace is a linked worktree of another
// repository; the clone shares that repository's objects and config.
func TestGitSentryWorktree(t *testing.T) {
	e := NewEnv(t)
	main := filepath.Join(e.Root, "mainrepo")
	os.MkdirAll(main, 0o755)
	gsRepo(t, main)
	os.Remove(e.Workspace)
	gsGit(t, main, "worktree", "add", "-q", "-b", "wt", e.Workspace)
	gsGit(t, e.Workspace, "commit", "-q", "--allow-empty", "-m", "in worktree")
	s := gsStart(t, e, "gswt", "")
	if got := s.must("git log -1 --format=%s && git config user.name"); got != "in worktree\nAgent Smith" {
		t.Errorf("sandbox view of a worktree's clone: %q", got)
	}
	tip := s.must("git commit -q --allow-empty -m agent && git rev-parse HEAD")
	Eventually(t, 10*time.Second, "agent commit in the main repository", func() bool {
		return hostRef(main, "refs/heads/lazaret/agent-gswt") == tip
	})
}

// TestGitSentrySubmodules: a submodule the host has initialised is checked
// out in the agent clone at the recorded commit, from the host's objects
// (no network), and real git works in it inside the sandbox.
func TestGitSentrySubmodules(t *testing.T) {
	e := NewEnv(t)
	// The user's global identity (~/.gitconfig of a HOME of the test's
	// own; podman keeps its storage and config through the XDG dirs); the
	// superproject has its own identity (gsRepo).
	realHome, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"XDG_DATA_HOME": filepath.Join(realHome, ".local", "share"), "XDG_CONFIG_HOME": filepath.Join(realHome, ".config")} {
		if os.Getenv(k) == "" {
			t.Setenv(k, v)
		}
	}
	home := filepath.Join(e.Root, "home")
	os.MkdirAll(home, 0o755)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Global User\n\temail = global@example.com\n"), 0o644)
	t.Setenv("HOME", home)
	sub := filepath.Join(e.Root, "subrepo")
	os.MkdirAll(sub, 0o755)
	gsRepo(t, sub)
	gsRepo(t, e.Workspace)
	gsGit(t, e.Workspace, "-c", "protocol.file.allow=always", "submodule", "-q", "add", sub, "deps/sub")
	gsGit(t, e.Workspace, "commit", "-q", "-m", "add submodule")
	recorded := gsGit(t, e.Workspace, "rev-parse", "HEAD:deps/sub")
	s := gsStart(t, e, "gssub", "")
	got := s.must("cat deps/sub/b.txt && git -C deps/sub rev-parse HEAD && git status --porcelain && git submodule status")
	want := "b\n" + recorded + "\n " + recorded + " deps/sub (heads/main)"
	if !strings.HasPrefix(got, "b\n"+recorded+"\n "+recorded+" deps/sub") {
		t.Errorf("submodule in the sandbox:\n%s\nwant\n%s", got, want)
	}
	// The agent can work in it and record the new commit in the superproject.
	tip := s.must(`cd deps/sub && echo agent >> b.txt && git commit -qam "agent in sub" && cd ../.. && git add deps/sub && git commit -qm "bump sub" && git status --porcelain && git rev-parse HEAD`)
	Eventually(t, 10*time.Second, "superproject commit on the host", func() bool {
		return hostRef(e.Workspace, "refs/heads/lazaret/agent-gssub") == tip
	})
	// As on the host: the superproject commits with its own identity, the
	// submodule (whose config has none) with the user's global one, which
	// the sandbox gets from host git although ~/.gitconfig is not there.
	if authors := s.must("git log -1 --format=%an && git -C deps/sub log -1 --format=%an"); authors != "Agent Smith\nGlobal User" {
		t.Errorf("commit authors (superproject, submodule) %q, want the host's resolution", authors)
	}
	// The agent's own global setting wins over the user's, as on a host.
	if author := s.must("git config --global user.name Agent && git -C deps/sub commit -q --allow-empty -m mine && git -C deps/sub log -1 --format=%an"); author != "Agent" {
		t.Errorf("after git config --global inside: author %q", author)
	}
}

// TestGitSentryResetBranch: reset-branch refuses while the sandbox runs;
// afterwards the old tip is kept and the next start begins at the host's
// HEAD with a fresh clone.
func TestGitSentryResetBranch(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	s := gsStartNamed(t, e, "default", "", "")
	tip := s.must("echo x > agent.txt && git add agent.txt && git commit -q -m agent && git rev-parse HEAD")
	Eventually(t, 10*time.Second, "agent commit on the host", func() bool {
		return hostRef(e.Workspace, "refs/heads/lazaret/agent-default") == tip
	})
	if r := e.Run("reset-branch"); r.Code == 0 || !strings.Contains(r.Stderr, "running") {
		t.Errorf("reset-branch while running: exit %d, %s", r.Code, r.Stderr)
	}
	s.comp.Close(context.Background())
	if out, err := exec.Command("podman", "rm", "-f", "-t", "0", s.name).CombinedOutput(); err != nil {
		t.Fatalf("podman rm: %v: %s", err, out)
	}
	out := e.MustRun("reset-branch")
	if !strings.Contains(out, "refs/lazaret/default/old/") {
		t.Errorf("reset-branch output: %q", out)
	}
	old := strings.Fields(gsGit(t, e.Workspace, "for-each-ref", "--format=%(objectname)", "refs/lazaret/default/old/"))
	if len(old) != 1 || old[0] != tip {
		t.Errorf("old tip kept as %v, want %s", old, tip)
	}
	head := gsGit(t, e.Workspace, "rev-parse", "HEAD")
	if got := gsGit(t, e.Workspace, "rev-parse", "lazaret/agent-default"); got != head {
		t.Errorf("agent branch at %s after reset, want HEAD %s", got, head)
	}
	s2 := gsStartNamed(t, e, "default", "", "")
	if _, _, code := s2.sh("test ! -e agent.txt"); code != 0 {
		t.Errorf("the new clone still has the old agent's file")
	}
	if got := s2.must("git rev-parse HEAD"); got != head {
		t.Errorf("new clone at %s, want %s", got, head)
	}
}

// TestGitSentryResetBranchWaitsForAStart: reset-branch takes the domain's
// lock, so it never removes the clone under a sandbox being started (a
// leader holds that lock until its coordinator answers, and a coordinator
// that answers makes reset-branch refuse).
func TestGitSentryResetBranchWaitsForAStart(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	d := domainOf(t, e, "default")
	f, err := os.OpenFile(d.Resources["lock_file"], os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	cmd := e.Cmd(context.Background(), "reset-branch")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("reset-branch went on while a start held the lock: %v %s", err, out.String())
	case <-time.After(1500 * time.Millisecond):
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("reset-branch after the lock was released: %v %s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reset-branch still waiting after the lock was released")
	}
}

// gsLogLevel is Info, or Debug with LAZARET_TEST_DEBUG set (shows every
// podman and host git call of the component).
func gsLogLevel() slog.Level {
	if os.Getenv("LAZARET_TEST_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// TestGitSentryThroughLazaret runs the Git Sentry the way users get it:
// `lazaret exec` (coordinator, runtime shim, every component), branch mode
// by default in a repository.
func TestGitSentryThroughLazaret(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	before := hostState(t, e.Workspace)
	// One session holds the sandbox for the whole test.
	hold, release := io.Pipe()
	holder := e.Cmd(context.Background(), "exec", "--", "cat")
	holder.Stdin = hold
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { release.Close(); _ = holder.Wait() }()
	sh := func(script string) Result { return e.Run("exec", "--", "sh", "-c", script) }
	must := func(script string) string {
		t.Helper()
		r := sh(script)
		if r.Code != 0 {
			t.Fatalf("lazaret exec %q: exit %d: %s%s", script, r.Code, r.Stdout, r.Stderr)
		}
		return strings.TrimSpace(r.Stdout)
	}
	for script, want := range map[string]string{
		"echo x >> /workspace/.git/config": "Read-only file system",
		"rm /workspace/.git/config":        "busy",
		"mv /workspace/.git /workspace/g2": "busy",
	} {
		if r := sh(script); r.Code == 0 || !strings.Contains(r.Stderr, want) {
			t.Errorf("lazaret exec %q: exit %d, %q; want a failure with %q", script, r.Code, r.Stderr, want)
		}
	}
	must("printf '#!/bin/sh\\n' > .git/hooks/pre-commit")
	rt, _ := domain.RuntimeDir()
	a, err := domain.New("default", e.Workspace, e.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	openVault(t, a, func() {
		if _, err := os.Stat(filepath.Join(gitsentry.ClonePath(a), ".git", "hooks", "pre-commit")); err == nil {
			t.Errorf("a hook written in the sandbox reached the host")
		} else if !os.IsNotExist(err) {
			t.Errorf("stat of the clone's hook: %v", err)
		}
	})
	tip := must("echo agent >> a.txt && git commit -qam 'via lazaret' && git rev-parse HEAD")
	Eventually(t, 10*time.Second, "the agent's commit on the host", func() bool {
		return hostRef(e.Workspace, "refs/heads/lazaret/agent-default") == tip
	})
	gsGit(t, e.Workspace, "config", "user.name", "Changed On Host")
	if got := must("git config user.name"); got != "Changed On Host" {
		t.Errorf("sandbox sees user.name %q", got)
	}
	if out := e.MustRun("log", "--oneline"); !strings.Contains(out, "via lazaret") {
		t.Errorf("lazaret log: %q", out)
	}
	if after := hostState(t, e.Workspace); after != before {
		t.Errorf("host repository changed:\n%s\n---\n%s", before, after)
	}
	e.MustRun("merge")
	if got := gsGit(t, e.Workspace, "rev-parse", "HEAD"); got != tip {
		t.Errorf("HEAD after lazaret merge = %s, want %s", got, tip)
	}
	// The coordinator found lazaret-fsmonitor beside lazaret, configured
	// git after the spec's safe.directory, and started the daemon: a
	// status after an edit is answered from its path list.
	if got := must("git config --get-all safe.directory; git config core.fsmonitor"); got != "/workspace\n"+gitsentry.ContainerFSMonitorBin {
		t.Errorf("git config in the sandbox: %q", got)
	}
	got := must("for i in $(seq 300); do [ -S " + fsmonitor.DefaultSocket + " ] && break; sleep 0.1; done; " +
		"git status --porcelain >/dev/null; git status --porcelain >/dev/null; echo x >> b.txt; " +
		"GIT_TRACE_FSMONITOR=1 git status --porcelain 2>&1 | grep -c \"fsmonitor_refresh_callback 'b.txt'\" || true")
	if got != "1" {
		t.Errorf("git status after an edit was not answered by the fsmonitor (%q)", got)
	}
}

// TestGitSentryStartMessages: a repository without commits is refused
// with a hint before anything starts; uncommitted host changes are
// reported once, on the first start.
func TestGitSentryStartMessages(t *testing.T) {
	e := NewEnv(t)
	gsGit(t, e.Workspace, "init", "-q")
	r := e.Run("exec", "--", "true")
	if r.Code != 2 || !strings.Contains(r.Stderr, "no commits") || !strings.Contains(r.Stderr, `git_mode = "direct"`) {
		t.Errorf("no commits: exit %d, %q", r.Code, r.Stderr)
	}
	gsGit(t, e.Workspace, "config", "user.name", "U")
	gsGit(t, e.Workspace, "config", "user.email", "u@example.com")
	gsGit(t, e.Workspace, "commit", "-q", "--allow-empty", "-m", "first")
	os.WriteFile(filepath.Join(e.Workspace, "wip.txt"), []byte("mine\n"), 0o644)
	if r := e.Run("exec", "--", "true"); r.Code != 0 || strings.Count(r.Stderr, "uncommitted changes") != 1 {
		t.Errorf("first start: exit %d, %q", r.Code, r.Stderr)
	}
	if r := e.Run("exec", "--", "test", "!", "-e", "wip.txt"); r.Code != 0 || strings.Contains(r.Stderr, "uncommitted") {
		t.Errorf("second start: exit %d, %q (want no notice, and no wip.txt in the clone)", r.Code, r.Stderr)
	}
}

// TestGitSentryHostGitHintUnderExclusiveAccess: under runsc
// --file-access-mounts=exclusive, the host .git must carry the
// share=shared hint the component adds, or a host-side `git config` is
// never seen in the sandbox. Control: the same mount without the hint
// keeps the stale value.
func TestGitSentryHostGitHintUnderExclusiveAccess(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	gitDir := filepath.Join(e.Workspace, ".git")
	for _, hinted := range []bool{true, false} {
		name := fmt.Sprintf("lazaret-gitsentry-hint-%d-%v", os.Getpid(), hinted)
		args := []string{"run", "-d", "--replace", "--name", name, "--runtime", gsRuntime(t),
			"--runtime-flag", "ignore-cgroups", "--runtime-flag", "file-access-mounts=exclusive", "--network", "none",
			"--mount", "type=bind,source=" + gitDir + ",destination=/run/lazaret/host.git,readonly=true"}
		if hinted {
			spec := &podman.ContainerSpec{}
			gitsentry.AddSharedHint(spec, gitsentry.HostGitHintName, gitDir)
			for k, v := range spec.Annotations {
				args = append(args, "--annotation", k+"="+v)
			}
		}
		args = append(args, gsImage, "sleep", "infinity")
		if out, err := exec.Command("podman", args...).CombinedOutput(); err != nil {
			t.Fatalf("podman run: %v: %s", err, out)
		}
		defer exec.Command("podman", "rm", "-f", "-t", "0", name).Run()
		get := func() string {
			out, _ := exec.Command("podman", "exec", name, "git", "config", "-f", "/run/lazaret/host.git/config", "user.name").Output()
			return strings.TrimSpace(string(out))
		}
		gsGit(t, e.Workspace, "config", "user.name", "Before")
		get() // the sandbox has now cached the file
		gsGit(t, e.Workspace, "config", "user.name", "After")
		got := get()
		switch {
		case hinted && got != "After":
			t.Errorf("with the hint, the sandbox sees user.name %q after the host changed it", got)
		case !hinted && got != "Before":
			t.Errorf("control: without the hint, the sandbox saw %q; exclusive access is not caching (the test cannot fail)", got)
		}
	}
}

// TestGitSentryLastCommitBeforeStop: a commit made by the last command of
// the last session is on the host once the sandbox is gone (the last sync
// runs before the container is removed), without another start.
func TestGitSentryLastCommitBeforeStop(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	rt, _ := domain.RuntimeDir()
	a, err := domain.New("default", e.Workspace, e.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		r := e.Run("exec", "--", "sh", "-c", fmt.Sprintf("git commit -q --allow-empty -m last%d && git rev-parse HEAD", i))
		if r.Code != 0 {
			t.Fatalf("exec: %d %s", r.Code, r.Stderr)
		}
		tip := strings.TrimSpace(r.Stdout)
		Eventually(t, 60*time.Second, "the sandbox gone", func() bool {
			return exec.Command("podman", "container", "exists", a.Container()).Run() != nil
		})
		// Give a coordinator that is still closing components a moment.
		time.Sleep(500 * time.Millisecond)
		if got := hostRef(e.Workspace, "refs/heads/lazaret/agent-default"); got != tip {
			t.Errorf("round %d: host agent branch at %q after the sandbox stopped, want %s", i, got, tip)
		}
	}
}

// bash runs a bash script in the sandbox's /workspace and returns its
// combined output.
func (s *gsSandbox) bash(script string) string {
	s.t.Helper()
	out, err := exec.Command("podman", "exec", "-w", "/workspace", s.name, "bash", "-c", script).CombinedOutput()
	if err != nil {
		s.t.Fatalf("in sandbox: bash: %v\n%s", err, out)
	}
	return string(out)
}

// waitFSMonitor waits until the fsmonitor daemon listens (it first watches
// every directory of the clone).
func (s *gsSandbox) waitFSMonitor() {
	s.t.Helper()
	s.must("for i in $(seq 300); do [ -S " + fsmonitor.DefaultSocket + " ] && exit 0; sleep 0.1; done; echo no fsmonitor socket; exit 1")
}

func fsmRepo(t *testing.T, e *Env) {
	t.Helper()
	if os.Getenv("LAZARET_BIN") == "" {
		t.Skip("LAZARET_BIN is not set (scripts/integration sets it)")
	}
	if err := fsmtest.Seed(e.Workspace); err != nil {
		t.Fatal(err)
	}
	gsGit(t, e.Workspace, "init", "-q")
	gsGit(t, e.Workspace, "add", ".")
	gsGit(t, e.Workspace, "commit", "-q", "-m", "seed")
}

// TestGitSentryFSMonitorMatchesFullScan: inside runsc, after every step
// of fsmtest.Steps (edits, creates, deletes, renames, directory removal
// and renames, mode changes, symlinks, commits, branch checkout, stash,
// reset, clean, a hard link), git status with the fsmonitor equals a full
// scan, and most steps were answered from the daemon's path list (the
// check exercised it). Then the sandbox is restarted after a host-side
// change to the stopped clone: the new daemon must not trust the index's
// old token. The control is TestGitSentryFSMonitorControl.
func TestGitSentryFSMonitorMatchesFullScan(t *testing.T) {
	e := NewEnv(t)
	fsmRepo(t, e)
	s := gsStart(t, e, "gsfsm", "")
	s.waitFSMonitor()
	if got := s.must("git config core.fsmonitor && git config core.fsmonitorHookVersion"); got != gitsentry.ContainerFSMonitorBin+"\n2" {
		t.Fatalf("git config in the sandbox: %q", got)
	}
	out := s.bash(fsmtest.Steps)
	r := fsmtest.Parse(out)
	if !r.Done {
		t.Fatalf("steps did not finish:\n%s", out)
	}
	if len(r.Mismatches) > 0 {
		t.Errorf("git status with the fsmonitor differs from a full scan after %v:\n%s", r.Mismatches, out)
	}
	if len(r.Incremental) < 10 {
		t.Errorf("only %d steps answered incrementally (%v): the fsmonitor was not exercised\n%s", len(r.Incremental), r.Incremental, out)
	}
	t.Logf("%d of the steps answered from the path list: %v", len(r.Incremental), r.Incremental)

	// Restart: the clone changes on the host while no sandbox runs.
	_ = s.comp.Close(context.Background())
	if err := exec.Command("podman", "rm", "-f", "-t", "0", s.name).Run(); err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(gitsentry.ClonePath(s.anchor), "src", "d10", "f01.txt")
	openVault(t, s.anchor, func() {
		if err := os.WriteFile(edited, []byte("edited while stopped\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	s2 := gsStart(t, e, "gsfsm", "")
	s2.waitFSMonitor()
	mon := s2.must("git status --porcelain")
	full := s2.must("GIT_OPTIONAL_LOCKS=0 git -c core.fsmonitor=false -c core.untrackedCache=false status --porcelain")
	if mon != full || !strings.Contains(mon, "src/d10/f01.txt") {
		t.Errorf("after a restart: with the fsmonitor %q, full scan %q", mon, full)
	}
}

// TestGitSentryFSMonitorControl: the same steps with a hook that always
// claims nothing changed are caught, so the comparison above would catch
// a stale fsmonitor.
func TestGitSentryFSMonitorControl(t *testing.T) {
	e := NewEnv(t)
	fsmRepo(t, e)
	s := gsStart(t, e, "gsfsmliar", "")
	s.waitFSMonitor()
	liar := "/tmp/liar-fsmonitor"
	s.must("cat > " + liar + " <<'EOF'\n" + fsmtest.Liar(gitsentry.ContainerFSMonitorBin) + "EOF\nchmod +x " + liar)
	out := s.bash("FSM_GIT='-c core.fsmonitor=" + liar + "'\n" + fsmtest.Steps)
	r := fsmtest.Parse(out)
	if !r.Done {
		t.Fatalf("steps did not finish:\n%s", out)
	}
	if len(r.Mismatches) == 0 {
		t.Fatalf("a lying fsmonitor hook went unnoticed:\n%s", out)
	}
	t.Logf("the lying hook was caught after %d steps: %v", len(r.Mismatches), r.Mismatches)
}
