//go:build kube

package kube_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
)

// TestBackendDetachedApproval is issue #35 on the cluster: a command
// started detached (`exec -t --detach`, its terminal held by a keeper on
// this machine) asks to run a command on the host; nobody is attached, so
// the request waits in the session's lazaret-kube process, where `lazaret
// --backend kubernetes approvals` lists it and `approvals answer ID approve
// --hash H` approves it; the command runs on the host, and `attach` shows
// the screen the session left and takes it to its end.
func TestBackendDetachedApproval(t *testing.T) {
	e := newUnattendedEnv(t)
	script := `echo MARK$((6*7)); ` + escClient + ` --reason "unattended" -- touch approved-file; echo "rc=$?"; read line`
	id := strings.TrimSpace(e.mustLazaret(nil, "exec", "-t", "--detach", "e2e", "--", "sh", "-c", script))
	if len(id) != 12 {
		t.Fatalf("exec --detach printed %q, not a session id", id)
	}
	if out := e.mustLazaret(nil, "ps"); !strings.Contains(out, "KEPT SESSION") || !strings.Contains(out, id) {
		t.Errorf("ps does not list the kept session %s:\n%s", id, out)
	}
	var pending []struct {
		ID, Hash, Session, Detail string
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(pending) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no pending request appeared")
		}
		time.Sleep(500 * time.Millisecond)
		if err := json.Unmarshal([]byte(e.mustLazaret(nil, "approvals", "--json")), &pending); err != nil {
			t.Fatal(err)
		}
	}
	p := pending[0]
	if !strings.HasPrefix(p.Session, id) || !strings.Contains(p.Detail, "approved-file") {
		t.Fatalf("pending request %+v", p)
	}
	if _, errOut, code := e.lazaret(nil, "approvals", "answer", p.ID, "approve", "--hash", strings.Repeat("0", 64)); code == 0 {
		t.Fatalf("a stale hash was accepted: %s", errOut)
	}
	e.mustLazaret(nil, "approvals", "answer", p.ID, "approve", "--hash", p.Hash)
	tm, cmd := e.attachOnTerminal(id)
	tm.WaitFor(t, "rc=0") // the screen, redrawn
	if _, err := os.Stat(filepath.Join(e.ws, "approved-file")); err != nil {
		t.Errorf("the approved command did not run on the host: %v", err)
	}
	_, _ = tm.Ptmx.Write([]byte("\r"))
	if err := cmd.Wait(); err != nil {
		t.Errorf("attach did not end with the session: %v\n%s", err, tm.Output())
	}
	if !tm.Shows("MARK42") {
		t.Errorf("attach did not show the session's screen:\n%s", tm.Output())
	}
}

// newUnattendedEnv is a backend environment that answers from any
// terminal, with the keepers' and sessions' sockets in a directory of
// this test's, and the workspace's sandbox claimed.
func newUnattendedEnv(t *testing.T) *backendEnv {
	return newKeptEnv(t, "allow_unenforced_egress = true\n[escalation]\nanswer_from = \"any\"")
}

// newKeptEnv is a backend environment of extra with the keepers' and
// sessions' sockets in a directory of this test's, and the workspace's
// sandbox claimed.
func newKeptEnv(t *testing.T, extra string) *backendEnv {
	e := newBackendEnv(t, extra)
	rt, err := os.MkdirTemp("", "lzk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	t.Setenv("XDG_RUNTIME_DIR", rt)
	e.mustLazaret(nil, "exec", "e2e", "--", "true") // claim first
	return e
}

// attachOnTerminal starts `attach id` on a terminal of the test's.
func (e *backendEnv) attachOnTerminal(id string) (*ptytest.Terminal, *exec.Cmd) {
	e.t.Helper()
	tm := ptytest.Open(e.t)
	cmd := exec.Command(e.bin, "--backend", "kubernetes", "--config", e.cfg, "--workspace", e.ws, "attach", id)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tm.TTY, tm.TTY, tm.TTY
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	return tm, cmd
}
