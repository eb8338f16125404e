//go:build kube

package kube_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBackendFork: `fork -n 2` of a running cluster sandbox that
// installed a file under a persistent dir and committed. Each attempt is
// a sandbox of its own: its clone starts at the parent's commit on its
// own branch, its persistent dir is a copy of the parent's (the parent's
// file, then only its own), its commit comes back to its own branch on
// the host; the parent's PVC has none of the attempts' files; `attempts
// rm` of one deletes its branch and PVC and leaves the other working.
// The fork's and the copy's times are logged (docs/KUBERNETES.md).
func TestBackendFork(t *testing.T) {
	// LAZARET_KUBE_FORK_MIB sizes the parent's blob (default 16 MiB):
	// the copy's time against its size.
	mib := 16
	if v, err := strconv.Atoi(os.Getenv("LAZARET_KUBE_FORK_MIB")); err == nil && v > 0 {
		mib = v
	}
	e := newBackendEnv(t, fmt.Sprintf("allow_unenforced_egress = true\nstate_size = \"%dMi\"", max(64, 2*mib)))
	e.setProfile("[profiles.fk]\nimage = \"" + gitImage + "\"\npersistent_dirs = [\"/usr/local\"]")
	hostGit := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", e.ws, "-c", "user.name=Host", "-c", "user.email=host@example.invalid"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	hostGit("init", "-q", "-b", "main")
	hostGit("commit", "-q", "--allow-empty", "-m", "host start")
	commit := func(msg string) string {
		return `git -c user.name=Agent -c user.email=agent@sandbox.invalid commit -q --allow-empty -m ` + msg + ` && git rev-parse HEAD`
	}
	// A blob beside the file: a copy that takes measurable time.
	parent := strings.TrimSpace(e.mustLazaret(nil, "exec", "fk", "--", "sh", "-c",
		fmt.Sprintf(`set -e; echo parent >/usr/local/parent-file; head -c %d /dev/urandom >/usr/local/blob; `, mib<<20)+commit("parent-work")))
	if got := hostGit("rev-parse", "refs/heads/lazaret/agent-fk"); got != parent {
		t.Fatalf("host agent branch %s, want the parent's %s", got, parent)
	}

	t0 := time.Now()
	out, errOut, code := e.lazaret(nil, "-v", "fork", "fk", "try", "-n", "2")
	took := time.Since(t0)
	if code != 0 {
		t.Fatalf("fork: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("fork -n 2 of a running sandbox (%d MiB in /usr/local): %s\n%s", mib, took.Round(10*time.Millisecond), out)
	for _, l := range strings.Split(errOut, "\n") {
		if strings.Contains(l, "copied the persistent dirs") || strings.Contains(l, "msg=forked") {
			t.Log(l)
		}
	}
	if !strings.Contains(out, "persistent dirs copied (copy, ") {
		t.Errorf("fork's copy:\n%s", out)
	}

	mine := `ls /usr/local | grep -E '^(parent-file|only-.*)$' | tr '\n' ' '`
	tips := map[string]string{}
	for _, n := range []string{"try-1", "try-2"} {
		got := strings.Fields(e.mustLazaret(nil, "exec", "--attempt", n, "fk", "--", "sh", "-c",
			`set -e; git rev-parse HEAD; git branch --show-current; `+mine+`; echo; echo `+n+` >/usr/local/only-`+n+`; `+commit("work-"+n)))
		if len(got) != 4 || got[0] != parent || got[1] != "lazaret/agent-fk."+n || got[2] != "parent-file" {
			t.Fatalf("attempt %s's sandbox: %q, want the parent's commit %s on lazaret/agent-fk.%s and only the parent's file", n, got, parent, n)
		}
		tips[n] = got[3]
		if h := hostGit("rev-parse", "refs/heads/lazaret/agent-fk."+n); h != got[3] || hostGit("rev-parse", h+"~1") != parent {
			t.Errorf("host branch of %s at %s, want its commit %s over %s", n, h, got[3], parent)
		}
	}
	if tips["try-1"] == tips["try-2"] {
		t.Errorf("both attempts committed %s", tips["try-1"])
	}
	for _, n := range []string{"try-1", "try-2"} {
		if got := strings.TrimSpace(e.mustLazaret(nil, "exec", "--attempt", n, "fk", "--", "sh", "-c", mine)); got != "only-"+n+" parent-file" {
			t.Errorf("attempt %s's /usr/local: %q, want the parent's file and its own", n, got)
		}
	}
	if got := strings.TrimSpace(e.mustLazaret(nil, "exec", "fk", "--", "sh", "-c", mine)); got != "parent-file" {
		t.Errorf("the parent's /usr/local after the attempts wrote theirs: %q", got)
	}
	if ls := e.mustLazaret(nil, "attempts", "fk"); !strings.Contains(ls, "try-1") || !strings.Contains(ls, "work-try-2") {
		t.Errorf("attempts:\n%s", ls)
	}

	rm := e.mustLazaret(nil, "attempts", "rm", "fk", "try-1")
	if !strings.Contains(rm, "branch lazaret/agent-fk.try-1 deleted (was "+tips["try-1"][:12]) {
		t.Errorf("rm: %s", rm)
	}
	if _, err := exec.Command("git", "-C", e.ws, "rev-parse", "--verify", "-q", "refs/heads/lazaret/agent-fk.try-1").Output(); err == nil {
		t.Error("rm kept try-1's branch")
	}
	e.waitGoneLabel("persistentvolumeclaims", "lazaret.dev/attempt=try-1")
	if got := strings.TrimSpace(e.mustLazaret(nil, "exec", "--attempt", "try-2", "fk", "--", "sh", "-c", mine)); got != "only-try-2 parent-file" {
		t.Errorf("try-2 after try-1's rm: %q", got)
	}
	if h := hostGit("rev-parse", "refs/heads/lazaret/agent-fk.try-2"); h != tips["try-2"] {
		t.Errorf("try-2's branch after try-1's rm: %s", h)
	}
	if _, errOut, code := e.lazaret(nil, "exec", "--attempt", "try-1", "fk", "--", "true"); code != 2 || !strings.Contains(errOut, `no attempt "try-1"`) {
		t.Errorf("exec in the removed attempt: exit %d: %s", code, errOut)
	}

	// keep: with both stopped, try-2's dir becomes the profile's.
	if _, errOut, code := e.lazaret(nil, "attempts", "keep", "fk", "try-2"); code != 5 {
		t.Errorf("keep of a running attempt: exit %d: %s", code, errOut)
	}
	e.mustLazaret(nil, "stop", "--attempt", "try-2", "fk")
	e.mustLazaret(nil, "stop", "fk")
	e.waitGone("sandboxclaims")
	t1 := time.Now()
	e.mustLazaret(nil, "attempts", "keep", "fk", "try-2")
	t.Logf("attempts keep (copy back over the profile's PVC): %s", time.Since(t1).Round(10*time.Millisecond))
	if got := strings.TrimSpace(e.mustLazaret(nil, "exec", "fk", "--", "sh", "-c", mine)); got != "only-try-2 parent-file" {
		t.Errorf("the profile's /usr/local after keep: %q, want try-2's", got)
	}
}

// waitGoneLabel waits until the namespace has no kinds with label sel.
func (e *backendEnv) waitGoneLabel(kinds, sel string) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		left := strings.TrimSpace(e.kube("get", kinds, "-n", e.namespace, "-l", sel, "-o", "name"))
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("left: %s", fmt.Sprint(left))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
