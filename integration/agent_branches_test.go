//go:build integration

package integration

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// sideRefs lists the host refs under refs/lazaret/<profile>/heads/.
func sideRefs(t testing.TB, ws, profile string) string {
	t.Helper()
	return gsGit(t, ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/lazaret/"+profile+"/heads/")
}

// TestAgentBranches: an agent's side branch and its main branch are on the
// host as soon as `lazaret exec` returns (no polling: exec waits for one
// ref sync); log and status show the side branch; reset-branch keeps it
// and the next start recreates it in the new clone, so the ref sync (which
// mirrors the agent's deletions) keeps it. Control: the agent deleting the
// branch in its clone deletes the host ref at the next sync, which is what
// a rebuilt clone without the branch did before.
func TestAgentBranches(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	const agentRef = "refs/heads/lazaret/agent-default"
	const featureRef = "refs/lazaret/default/heads/feature"
	// A session holds the sandbox, so that only exec's own wait (not the
	// teardown's last sync) can have brought the commits over.
	hold, release := io.Pipe()
	holder := e.Cmd(context.Background(), "exec", "--", "cat")
	holder.Stdin = hold
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	held := true
	defer func() {
		if held {
			release.Close()
			_ = holder.Wait()
		}
	}()
	must := func(script string) []string {
		t.Helper()
		r := e.Run("exec", "--", "sh", "-c", script)
		if r.Code != 0 {
			t.Fatalf("lazaret exec %q: exit %d: %s%s", script, r.Code, r.Stdout, r.Stderr)
		}
		return strings.Fields(r.Stdout)
	}
	tips := must("git checkout -q -b feature && git commit -q --allow-empty -m 'feature one' && " +
		"git commit -q --allow-empty -m 'feature two' && git rev-parse HEAD && " +
		"git checkout -q lazaret/agent-default && git commit -q --allow-empty -m 'main work' && git rev-parse HEAD")
	// Right after exec returned: no sleep, no polling.
	hostFeature, hostAgent := gsGit(t, e.Workspace, "rev-parse", "--verify", "-q", featureRef), gsGit(t, e.Workspace, "rev-parse", "--verify", "-q", agentRef)
	if len(tips) != 2 || hostFeature != tips[0] || hostAgent != tips[1] {
		t.Fatalf("right after exec: host feature %q agent %q, sandbox tips %v", hostFeature, hostAgent, tips)
	}

	r := e.Run("log", "--oneline")
	if r.Code != 0 || !strings.Contains(r.Stdout, "main work") || strings.Contains(r.Stdout, "feature one") ||
		!strings.Contains(r.Stderr, "side branches: feature (2 commits); see lazaret log --all") {
		t.Errorf("lazaret log: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	all := e.MustRun("log", "--oneline", "--all")
	if !strings.Contains(all, "main work") || !strings.Contains(all, "== side branch feature ("+featureRef+", 2 commits not in HEAD)") ||
		!strings.Contains(all, "feature one") || !strings.Contains(all, "feature two") {
		t.Errorf("lazaret log --all:\n%s", all)
	}
	if one := e.MustRun("log", "--oneline", "--branch", "feature"); !strings.Contains(one, "feature two") || strings.Contains(one, "main work") {
		t.Errorf("lazaret log --branch feature:\n%s", one)
	}
	if r := e.Run("log", "--branch", "nope"); r.Code != 2 || !strings.Contains(r.Stderr, "--branch nope") {
		t.Errorf("lazaret log --branch nope: exit %d, %s", r.Code, r.Stderr)
	}
	if st := e.MustRun("status"); !strings.Contains(st, "SIDE BRANCH") || !strings.Contains(st, "feature") ||
		!strings.Contains(st, tips[0][:12]) || !strings.Contains(st, "2 commits") {
		t.Errorf("lazaret status:\n%s", st)
	}

	// Measured, not asserted: what an exec costs with its sync (nothing
	// new to bring over).
	var took []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		must("true")
		took = append(took, time.Since(start))
	}
	t.Logf("lazaret exec -- true with the sandbox held (incl. its ref sync): %v", took)

	// Stop, reset, look at the refs before and after.
	release.Close()
	_ = holder.Wait()
	held = false
	e.MustRun("stop")
	rt, _ := domain.RuntimeDir()
	a, err := domain.New("default", e.Workspace, e.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 60*time.Second, "the sandbox gone", func() bool {
		return exec.Command("podman", "container", "exists", a.Container()).Run() != nil
	})
	before := sideRefs(t, e.Workspace, "default")
	out := e.MustRun("reset-branch")
	after := sideRefs(t, e.Workspace, "default")
	t.Logf("side refs before reset: %q, after: %q", before, after)
	if before != featureRef+" "+tips[0] || after != before {
		t.Errorf("side refs before reset %q, after %q", before, after)
	}
	if !strings.Contains(out, "side branch feature kept as "+featureRef) {
		t.Errorf("reset-branch output:\n%s", out)
	}
	// The next start's clone has the branch again, and its syncs keep
	// the host ref (exec's own sync ran before it returned).
	if r := e.Run("exec", "--", "git", "rev-parse", "--verify", "-q", "refs/heads/feature"); strings.TrimSpace(r.Stdout) != tips[0] {
		t.Errorf("feature in the new clone: exit %d %q, want %s", r.Code, r.Stdout, tips[0])
	}
	if got := sideRefs(t, e.Workspace, "default"); got != before {
		t.Errorf("side refs after the first sync of the new clone: %q, want %q", got, before)
	}
	// Control: a branch missing from the clone is deleted on the host by
	// the sync, at once.
	must("git branch -q -D feature")
	if got := sideRefs(t, e.Workspace, "default"); got != "" {
		t.Errorf("control: the agent deleted feature, host still has %q (the sync does not mirror deletions: the test cannot fail)", got)
	}
}
