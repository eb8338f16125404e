//go:build kube

package kube_test

import (
	"os/exec"
	"strings"
	"testing"
)

// gitImage has git (the tier's busybox image has not).
const gitImage = "localhost/lazaret-default:latest"

// TestBackendGitSync: in a branch-mode workspace the pod's /workspace is
// a clone of the host's HEAD seeded through the API server, the agent's
// commit comes back to the host's lazaret/agent-<profile> when the
// command ends (objects verified by host git), and `log` through the
// Kubernetes backend shows it on the host. Nothing of the host repository
// is mounted into the pod: its clone has no alternates. A branch name
// lazaret refuses stays in the pod and is in the audit trail.
func TestBackendGitSync(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true")
	e.setProfile("[profiles.git]\nimage = \"" + gitImage + "\"\npersistent_dirs = []")
	hostGit := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", e.ws, "-c", "user.name=Host", "-c", "user.email=host@example.invalid"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	hostGit("init", "-q", "-b", "main")
	hostGit("commit", "-q", "--allow-empty", "-m", "host start")
	head := hostGit("rev-parse", "HEAD")

	out := e.mustLazaret(nil, "exec", "git", "--", "sh", "-c",
		`git rev-parse HEAD && git branch --show-current && ! test -e .git/objects/info/alternates && `+
			`git -c user.name=Agent -c user.email=agent@sandbox.invalid commit -q --allow-empty -m "agent work" && git branch 'bad"name' && git rev-parse HEAD`)
	lines := strings.Fields(out)
	if len(lines) != 3 || lines[0] != head || lines[1] != "lazaret/agent-git" {
		t.Fatalf("the pod's clone: %q, want HEAD %s on lazaret/agent-git", out, head)
	}
	agent := lines[2]
	if got := hostGit("rev-parse", "refs/heads/lazaret/agent-git"); got != agent {
		t.Fatalf("host agent branch %s, want the agent's %s", got, agent)
	}
	if got := hostGit("cat-file", "-t", agent); got != "commit" {
		t.Fatalf("the agent's commit on the host: %s", got)
	}
	if out := e.mustLazaret(nil, "log", "git"); !strings.Contains(out, "agent work") {
		t.Errorf("log through the Kubernetes backend:\n%s", out)
	}
	// The refused branch name is not synced, and the Domain Anchor's trail
	// says so (the same trail local sandboxes write).
	if out := e.mustLazaret(nil, "audit", "git"); !strings.Contains(out, "git.ref_skipped") || !strings.Contains(out, "bad") {
		t.Errorf("audit through the Kubernetes backend:\n%s", out)
	}
	// A second command finds the clone (no second seed): its work stays.
	if out := e.mustLazaret(nil, "exec", "git", "--", "git", "log", "--format=%s", "-1"); strings.TrimSpace(out) != "agent work" {
		t.Errorf("second exec sees %q", out)
	}
}
