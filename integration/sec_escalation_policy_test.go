//go:build integration

package integration

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// secMakefile has the targets the policy test asks for; with SHELL=/bin/cat
// and .SHELLFLAGS=<file>, make "runs" each recipe as `cat <file> <recipe>`.
const secMakefile = "lint:\n\t@echo linted\ntest:\n\t@echo tested\nunit:\n\t@echo unit-ok\ncheck:\n\t@echo checked\n"

// TestSecEscalationAppendedWords (issue #12): in branch mode with
// auto_approve = ["make lint"], the agent must not get make to read a
// host file by appending make variables. From inside the real sandbox,
// through the real CLI without a terminal:
//   - `make lint` runs without asking (control of the channel);
//   - `make lint SHELL=/bin/cat .SHELLFLAGS=<host file>`, MAKEFILES=,
//     MAKEFLAGS= go to the prompt, are denied (126, no terminal) and the
//     file's content never comes back; the audit trail says so;
//   - `make test {args}` admits a plain word (`make test unit`) but not
//     the same attack words.
//
// Positive controls in the same test: the attack really reads the file
// when make runs it (directly on the host), and an entry that approves the
// exact attack argv lets it through the same channel with the content.
func TestSecEscalationAppendedWords(t *testing.T) {
	e := NewEnv(t)
	secret := "host-secret-" + hex.EncodeToString(randBytes(t, 8))
	hostFile := filepath.Join(e.Root, "host-only.txt")
	if err := os.WriteFile(hostFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Branch mode: the host workspace is a repository with the Makefile.
	if err := os.WriteFile(filepath.Join(e.Workspace, "Makefile"), []byte(secMakefile), 0o644); err != nil {
		t.Fatal(err)
	}
	gsGit(t, e.Workspace, "init", "-q")
	gsGit(t, e.Workspace, "add", ".")
	gsGit(t, e.Workspace, "commit", "-q", "-m", "makefile")
	attack := "SHELL=/bin/cat .SHELLFLAGS=" + hostFile

	// Positive control 1: make itself does leak the file with these words.
	ctl := t.TempDir()
	if err := os.WriteFile(filepath.Join(ctl, "Makefile"), []byte(secMakefile), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", append([]string{"lint"}, strings.Fields(attack)...)...)
	cmd.Dir = ctl
	if out, _ := cmd.CombinedOutput(); !strings.Contains(string(out), secret) {
		t.Fatalf("control: make lint %s did not print the host file: %s", attack, out)
	}

	e.WriteConfig("[escalation]\nauto_approve = [\"make lint\", \"make test {args}\", \"make check " + attack + "\"]\n")
	script := strings.Join([]string{
		"test -f Makefile && echo clone-has-makefile",
		"lazaret-escalate -- make lint; echo rc-lint=$?",
		"lazaret-escalate -- make lint " + attack + "; echo rc-shell=$?",
		"lazaret-escalate -- make lint MAKEFILES=" + hostFile + "; echo rc-makefiles=$?",
		"lazaret-escalate -- make lint MAKEFLAGS=--eval=x; echo rc-makeflags=$?",
		"lazaret-escalate -- make test unit; echo rc-unit=$?",
		"lazaret-escalate -- make test " + attack + "; echo rc-test-shell=$?",
		"lazaret-escalate -- make test ../x; echo rc-test-dotdot=$?",
		// Positive control 2: approved exactly, the channel returns the file.
		"lazaret-escalate -- make check " + attack + "; echo rc-control=$?",
	}, "\n")
	r := e.Run("exec", "--", "sh", "-c", script)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"clone-has-makefile", "linted\nrc-lint=0", "rc-shell=126", "rc-makefiles=126", "rc-makeflags=126",
		"tested\nunit-ok\nrc-unit=0", "rc-test-shell=126", "rc-test-dotdot=126", secret + "\n"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr: %s", want, r.Stdout, r.Stderr)
		}
	}
	// The secret appears once: from the control, never from the attacks.
	before, _, _ := strings.Cut(r.Stdout, "rc-test-dotdot=")
	if strings.Contains(before, secret) || strings.Count(r.Stdout, secret) != 1 {
		t.Errorf("the host file came back to the sandbox outside the control:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stderr, "no terminal") || !strings.Contains(r.Stderr, "an assignment") {
		t.Errorf("stderr does not say why:\n%s", r.Stderr)
	}

	var audit string
	Eventually(t, time.Minute, "the escalations in the audit trail", func() bool {
		res := e.Run("audit")
		audit = res.Stdout
		return res.Code == 0 && strings.Count(audit, "escalation.result") >= 3
	})
	for _, want := range []string{`rule="make lint"`, `rule="make test {args}"`, "decision=denied", "no terminal",
		"argv=[make lint SHELL=/bin/cat .SHELLFLAGS=" + hostFile + "]", "SHELL=/bin/cat", "is an assignment"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit lacks %q:\n%s", want, audit)
		}
	}
}

func randBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
