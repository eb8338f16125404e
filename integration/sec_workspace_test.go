//go:build integration

package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runIn runs lazaret with args in dir and returns its output and code.
func runIn(t *testing.T, e *Env, dir string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := e.Cmd(ctx, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		code = cmd.ProcessState.ExitCode()
		if code < 0 {
			t.Fatalf("lazaret %v: %v", args, err)
		}
	}
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// TestWorkspaceHomeRefused: started in the home directory, lazaret refuses
// before anything exists (no data root, no container, no coordinator):
// exit 5, one line naming the directory and why, a hint. The agent would
// otherwise write ~/.bashrc: positive control, the same start in a plain
// project directory (direct mode, said on stderr) lets the agent's write
// of .bashrc land on the host.
func TestWorkspaceHomeRefused(t *testing.T) {
	e := NewEnv(t)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	home, _ = filepath.EvalSymlinks(home)
	before, _ := os.ReadFile(filepath.Join(home, ".bashrc"))
	for _, args := range [][]string{{"exec", "--", "sh", "-c", "echo pwned >> /workspace/.bashrc"}, {"shell"}} {
		r := runIn(t, e, home, args...)
		if r.Code != 5 || !strings.HasPrefix(r.Stderr, "lazaret: workspace "+home+" is your home directory") ||
			strings.Count(r.Stderr, "\n") != 2 || !strings.Contains(r.Stderr, "hint: cd into a project directory, or name one with --workspace DIR") {
			t.Errorf("lazaret %v in %s: exit %d, stderr %q", args, home, r.Code, r.Stderr)
		}
	}
	if _, err := os.Stat(e.DataRoot); err == nil {
		t.Errorf("the refused start created the data root %s", e.DataRoot)
	}
	if out, _ := Podman(t, "ps", "-a", "--filter", "label=lazaret.data_root="+e.DataRoot, "--format", "{{.Names}}"); strings.TrimSpace(out) != "" {
		t.Errorf("the refused start made containers: %s", out)
	}
	if after, _ := os.ReadFile(filepath.Join(home, ".bashrc")); !bytes.Equal(after, before) {
		t.Errorf("~/.bashrc changed")
	}
	// Positive control: a plain directory is mounted read-write (direct
	// mode), and the agent's write reaches the host.
	r := runIn(t, e, e.Workspace, "exec", "--", "sh", "-c", "echo pwned >> /workspace/.bashrc")
	if r.Code != 0 {
		t.Fatalf("control: exit %d %s", r.Code, r.Stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(e.Workspace, ".bashrc")); string(data) != "pwned\n" {
		t.Errorf("control: the agent's write did not land (%q): the refusal above proves nothing", data)
	}
	if strings.Count(r.Stderr, "lazaret: direct mode: the agent writes "+e.Workspace+" on the host itself") != 1 {
		t.Errorf("direct mode not announced in one line: %q", r.Stderr)
	}
}

// TestWorkspaceRepoSubdirectory: started in a subdirectory of a
// repository, the sandbox works on the repository's top level in branch
// mode, so the agent's write stays in its clone. Control: the same
// subdirectory named with --workspace is direct mode (announced), and the
// same write lands on the host.
func TestWorkspaceRepoSubdirectory(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	sub := filepath.Join(e.Workspace, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write := "pwd; test -e /workspace/a.txt && echo top; echo agent > /workspace/agent.txt"
	r := runIn(t, e, sub, "exec", "--", "sh", "-c", write)
	if r.Code != 0 || !strings.Contains(r.Stdout, "top") || strings.Contains(r.Stderr, "direct mode") {
		t.Fatalf("from a subdirectory: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, p := range []string{filepath.Join(e.Workspace, "agent.txt"), filepath.Join(sub, "agent.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("branch mode: the agent's write reached the host at %s", p)
		}
	}
	if out := runIn(t, e, sub, "domain").Stdout; !regexp.MustCompile(`(?m)^workspace +` + regexp.QuoteMeta(e.Workspace) + `$`).MatchString(out) {
		t.Errorf("lazaret domain in %s:\n%s", sub, out)
	}
	runIn(t, e, sub, "stop")
	// Control: the subdirectory itself, named explicitly (no repository
	// there: direct mode, consented to).
	r = runIn(t, e, sub, "--workspace", sub, "exec", "--direct", "--", "sh", "-c", write)
	if r.Code != 0 || !strings.Contains(r.Stderr, "lazaret: direct mode: the agent writes "+sub) {
		t.Fatalf("--workspace %s: exit %d\n%s", sub, r.Code, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(sub, "agent.txt")); err != nil {
		t.Errorf("control: in direct mode the write did not land: %v", err)
	}
}
