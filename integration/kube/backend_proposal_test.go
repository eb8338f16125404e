//go:build kube

package kube_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
)

// TestBackendNetProposal: issue 36's loop on a cluster sandbox. The agent
// cannot resolve a name outside the profile's allow_domains (the
// control), proposes it, and the proposal is shown on the session's
// terminal; [A] applies it to the pod's running netd (an exec into netd's
// container, no restart): the agent's --wait exits 0 and the same lookup
// now resolves through netd; --denials lists the earlier refusal. An
// address range is refused at once (the NetworkPolicy's). The time from
// the key to the agent's --wait returning is logged.
func TestBackendNetProposal(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true")
	e.setProfile(`allow_domains = ["allowed.e2e.test"]`)
	e.mustLazaret(nil, "exec", "e2e", "--", "true") // claim first
	script := `nslookup approved.e2e.test >/dev/null 2>&1; echo "before=$?"; ` +
		escClient + ` --propose net 8.8.8.0/24; echo "cidr=$?"; ` +
		`id=$(` + escClient + ` --propose net --why "the docs" approved.e2e.test); ` + escClient + ` --wait "$id"; echo "wait=$?"; ` +
		`nslookup approved.e2e.test; echo "after=$?"; ` + escClient + ` --denials; echo "denials=$?"`
	tm := ptytest.Open(t)
	cmd := exec.Command(e.bin, "--backend", "kubernetes", "--config", e.cfg, "--workspace", e.ws, "exec", "-t", "e2e", "--", "sh", "-c", script)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tm.TTY, tm.TTY, tm.TTY
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	tm.WaitFor(t, "abort lazaret")
	for _, want := range []string{"proposes a policy rule", "allow_domains += approved.e2e.test", "the docs"} {
		if !tm.Shows(want) {
			t.Fatalf("prompt lacks %q:\n%s", want, tm.Output())
		}
	}
	time.Sleep(prompt.MinReadable + 300*time.Millisecond) // the readability gate
	began := time.Now()
	_, _ = tm.Ptmx.Write([]byte("a"))
	tm.WaitFor(t, "wait=")
	t.Logf("measured: key to the agent's --wait returning: %v", time.Since(began).Round(time.Millisecond))
	tm.WaitFor(t, "denials=")
	out := tm.Output()
	for _, re := range []string{`before=[1-9]`, `cidr=126`, `NetworkPolicy`, `wait=0`, `(?s)` + upstreamAnswer + `.*after=0`, `dns approved\.e2e\.test`, `denials=0`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", re, out)
		}
	}
	if strings.Count(out, "abort lazaret") > 2 {
		t.Errorf("asked more than once:\n%s", out)
	}
}
