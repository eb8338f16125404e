//go:build kube

package kube_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/engine/session"
)

// escToken is a random word only the host workspace holds.
func escToken(t *testing.T, ws string) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	tok := "host-only-" + hex.EncodeToString(b[:])
	if err := os.WriteFile(filepath.Join(ws, "host-marker"), []byte(tok+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return tok
}

const escClient = "/lazaret/lazaret-escalate"

// TestBackendEscalation: a request from a cluster session reaches the
// host through the relay in the pod and the API server: an auto-approved
// command runs on the host, in the host workspace (it reads a file only
// the host has), and its output and exit code come back; a request the
// policy does not approve, from a session without a terminal, is denied
// (126) and audited; a request with no session delegation (the agent's
// own, outside the session's holder) is refused, while the same command
// from the session runs (positive control).
func TestBackendEscalation(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true\n[escalation]\nauto_approve = [\"cat host-marker\", \"false\"]")
	tok := escToken(t, e.ws)
	out, errOut, code := e.lazaret(nil, "exec", "e2e", "--", "sh", "-c",
		`test ! -e host-marker && echo not-in-pod; `+escClient+` -- cat host-marker`)
	if code != 0 || !strings.Contains(out, "not-in-pod") || !strings.Contains(out, tok) {
		t.Fatalf("auto-approved request: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if strings.Contains(out, "lazaret-holder-ready") || strings.Contains(out, "\x1b_") {
		t.Errorf("the holder's marker reached the output: %q", out)
	}
	// The client the pod's init container installed is read-only to root
	// in the sandbox (a replaced holder would receive a later session's
	// delegation); the same write elsewhere works (control).
	out, errOut, _ = e.lazaret(nil, "exec", "e2e", "--", "sh", "-c",
		`for f in /tmp/lazaret-escalate `+escClient+` /lazaret/lazaret-escalate-go; do if echo x 2>/dev/null >$f; then echo "wrote $f"; else echo "refused $f"; fi; done;`+
			` mount -o remount,rw /lazaret 2>/dev/null && echo remounted; true`)
	if !strings.Contains(out, "wrote /tmp/lazaret-escalate") || !strings.Contains(out, "refused "+escClient) ||
		!strings.Contains(out, "refused /lazaret/lazaret-escalate-go") || strings.Contains(out, "remounted") {
		t.Errorf("the escalation client is not read-only in the sandbox:\n%s%s", out, errOut)
	}
	// Measured: what the relay adds to a session's start.
	for i := 0; i < 3; i++ {
		_, errOut, _ := e.lazaret(nil, "--verbose", "exec", "e2e", "--", "true")
		for _, l := range strings.Split(errOut, "\n") {
			if strings.Contains(l, "escalation relay ready") {
				t.Logf("session %d: %s", i, l)
			}
		}
	}
	// A host command's exit code comes back.
	if _, errOut, code := e.lazaret(nil, "exec", "e2e", "--", escClient, "--", "false"); code != 1 {
		t.Errorf("exit code through escalation: %d, want 1; %s", code, errOut)
	}
	// Not auto-approved, no terminal: denied and audited.
	out, errOut, code = e.lazaret(nil, "exec", "e2e", "--", escClient, "--reason", "test", "--", "touch", "host-written")
	if code != 126 {
		t.Errorf("unapproved request without a terminal: exit %d, want 126\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "host-written")); err == nil {
		t.Error("the unapproved command ran on the host")
	}
	audit := e.mustLazaret(nil, "audit", "e2e")
	for _, want := range []string{"escalation.request", "escalation.decision", "escalation.result", "touch", "denied"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit trail lacks %q:\n%s", want, audit)
		}
	}
	// A request signed under a session the host never registered (the
	// agent's forgery, sent through the same relay and TLS): refused and
	// audited; the genuine request above ran (positive control).
	forged, err := session.New()
	if err != nil {
		t.Fatal(err)
	}
	d, err := forged.Delegate(domain.Hash("e2e", e.ws), time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = e.lazaret(nil, "exec", "e2e", "--", "sh", "-c",
		"unset LAZARET_SESSION_SOCKET; export "+strings.Join(d.Env(), " ")+"; exec "+escClient+" -- cat host-marker")
	if code != 125 || strings.Contains(out, tok) {
		t.Errorf("a forged request: exit %d, want 125\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if audit := e.mustLazaret(nil, "audit", "e2e"); !strings.Contains(audit, "escalation.rejected") || !strings.Contains(audit, "unknown session") {
		t.Errorf("the forged request is not audited as rejected:\n%s", audit)
	}
	// Last (it breaks the sandbox): the client's path cannot be taken
	// over by moving it aside and making a new one: its mount point is
	// directly below "/", and a mount point cannot be renamed. Control:
	// root renames a directory that holds a mount point (the relay's
	// directory's parent, and /run).
	out, errOut, _ = e.lazaret(nil, "exec", "e2e", "--", "sh", "-c",
		`mv /lazaret /lazaret-moved 2>/dev/null && echo client-moved; mkdir -p /run/lazaret; mv /run /run-moved 2>&1 && echo run-moved; grep -E ' /lazaret' /proc/mounts; true`)
	t.Logf("moving the client's mount point:\n%s%s", out, errOut)
	if strings.Contains(out, "client-moved") || !strings.Contains(out, "run-moved") || !strings.Contains(out, " /lazaret ") {
		t.Errorf("the client's mount point could be moved, or the control failed:\n%s", out)
	}
}

// escAttack runs as root in a second session of the same pod: it looks
// for the first session's delegated key in every holder's, signer's and
// control victim's /proc (environ, descriptors, maps, mem, and the bytes
// still waiting on each one's stdin), then asks every other session's
// holder socket to sign a request.
const escAttack = `
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$pid" = "$PPID" ] || [ "$pid" = "$$" ] && continue
  cl=$(tr '\0' ' ' < $p/cmdline 2>/dev/null)
  case "$cl" in
  "/lazaret/lazaret-escalate __session "*|"lazaret-escalate-go __signer "*|*" control-victim "*) ;;
  *) continue ;;
  esac
  case "$cl" in *" attacker "*) continue ;; esac
  echo "target $pid $cl"
  if grep -a -o 'LAZARET_DELEGATED_KEY=[A-Za-z0-9_-]*' $p/environ 2>/dev/null; then echo "environ-read $pid"; else echo "environ-denied $pid"; fi
  if readlink $p/fd/0 >/dev/null 2>&1; then echo "fd-read $pid"; else echo "fd-denied $pid"; fi
  if cat $p/maps >/dev/null 2>&1; then echo "maps-read $pid"; else echo "maps-denied $pid"; fi
  if (exec 3<$p/mem) 2>/dev/null; then echo "mem-open $pid"; else echo "mem-denied $pid"; fi
  got=$(timeout 3 head -c 200 $p/fd/0 2>/dev/null | tr -c 'A-Za-z0-9_=-' ' ')
  [ -n "$got" ] && echo "stdin-read $pid $got"
  echo "stdin-kind $pid $(ls -l $p/fd/0 2>&1 | sed 's/.*-> //')"
done
for s in /tmp/lazaret-session-*/sock; do
  [ "$s" = "$LAZARET_SESSION_SOCKET" ] && continue
  out=$(LAZARET_SESSION_SOCKET=$s lazaret-escalate -- echo stolen-signature 2>&1); echo "foreign-socket rc=$? $out"
done
out=$(lazaret-escalate -- echo own-signature 2>&1); echo "own-socket rc=$? $out"
echo attack-done
`

// TestBackendSessionAnchorIsolation: two sessions on one cluster sandbox.
// Root in the second can neither read the first's delegated key (its
// holder took it from stdin only once non-dumpable) nor get a request
// signed as the first through its holder. Controls, in the same pod and
// by the same script: a key in a plain process's environment is read,
// and bytes waiting on a plain process's stdin (the delegation written
// without the holder's handshake) are read; the attacker's own session
// does get its requests signed. (Measured: a plain exec's stdin is the
// runtime's host descriptor, "host:[N]", not an in-sandbox pipe; the
// stdin control is an in-sandbox pipe, which the same script reads.)
func TestBackendSessionAnchorIsolation(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true\n[escalation]\nauto_approve = [\"echo victim-ok\", \"echo own-signature\", \"echo stolen-signature\"]")
	oldKey := "control" + escRandom(t)
	pipeSecret := "pipesecret" + escRandom(t)
	victim := e.background("", "exec", "e2e", "--", "sh", "-c", escClient+` --timeout 60s -- echo victim-ok; echo victim-ready; sleep 600; true`, "session-one")
	victim.waitFor(t, e, "victim-ready")
	if !strings.Contains(victim.output(), "victim-ok") {
		t.Fatalf("session one cannot escalate:\n%s", victim.output())
	}
	// Controls: the old ways a key reached a process, in plain execs of
	// the same container (kubectl, no holder): in its environment, and
	// waiting on its stdin (the frame written without the handshake).
	// (The tier's image links only a few applets; its sh runs the rest.)
	pod := strings.TrimSpace(e.mustLazaret(nil, "exec", "e2e", "--", "sh", "-c", "hostname"))
	env := e.kubectlBackground("", "exec", "-n", e.namespace, pod, "-c", "agent", "--", "sh", "-c",
		"export LAZARET_DELEGATED_KEY="+oldKey+"; exec sh -c 'echo env-ready; sleep 600; true' control-victim")
	env.waitFor(t, e, "env-ready")
	pipe := e.kubectlBackground("", "exec", "-n", e.namespace, pod, "-c", "agent", "--",
		"sh", "-c", "echo "+pipeSecret+" | sh -c 'echo pipe-ready; sleep 600; true' control-victim")
	pipe.waitFor(t, e, "pipe-ready")

	out, errOut, _ := e.lazaret(nil, "exec", "e2e", "--", "sh", "-c", escAttack, "attacker")
	all := out + errOut
	t.Logf("attack:\n%s", all)
	if !strings.Contains(all, "attack-done") {
		t.Fatal("the attack did not run to its end")
	}
	holders := 0
	for _, line := range strings.Split(all, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "target" || (strings.Contains(line, "control-victim") && f[2] != escClient) {
			continue
		}
		holders++
		for _, want := range []string{"environ-denied ", "fd-denied ", "maps-denied ", "mem-denied "} {
			if !strings.Contains(all, want+f[1]+"\n") {
				t.Errorf("session process %s: no %q", f[1], want)
			}
		}
		if strings.Contains(all, "stdin-read "+f[1]+" ") {
			t.Errorf("session process %s: its stdin was read", f[1])
		}
	}
	if holders < 2 || !strings.Contains(all, "lazaret-escalate-go __signer ") {
		t.Errorf("the attack found %d session processes (session one's signer among them: %v)", holders, strings.Contains(all, "lazaret-escalate-go __signer "))
	}
	if !strings.Contains(all, "\nLAZARET_DELEGATED_KEY="+oldKey+"\nenviron-read ") {
		t.Error("control: the key in a plain environment was not read")
	}
	if !strings.Contains(all, pipeSecret) {
		t.Error("control: the bytes waiting on a plain process's stdin were not read")
	}
	for _, line := range strings.Split(all, "\n") {
		if strings.HasPrefix(line, "LAZARET_DELEGATED_KEY=") && line != "LAZARET_DELEGATED_KEY="+oldKey {
			t.Errorf("a delegated key other than the control's was read: %s", line)
		}
	}
	foreign := 0
	for _, line := range strings.Split(all, "\n") {
		if strings.HasPrefix(line, "foreign-socket ") {
			foreign++
			if !strings.HasPrefix(line, "foreign-socket rc=125 ") || strings.Contains(line, "stolen-signature") {
				t.Errorf("a request was signed through another session's holder: %s", line)
			}
		}
	}
	if foreign == 0 {
		t.Error("the attack found no other session's socket")
	}
	if !strings.Contains(all, "own-socket rc=0 own-signature") {
		t.Error("control: the attacker's own session did not get its request signed")
	}
	// Measured, not asserted: does gVisor make a process whose
	// executable its (capability-less) root cannot read non-dumpable from
	// its execve on, as Linux does? That would close the window between a
	// holder's execve and its prctl.
	m := e.kube("exec", "-n", e.namespace, pod, "-c", "agent", "--", "sh", "-c", `b=/bin/busybox; mkdir -p /tmp/r /tmp/x; cp "$b" /tmp/r/sleep; cp "$b" /tmp/x/sleep; chmod 0755 /tmp/r/sleep; chmod 0111 /tmp/x/sleep
for d in r x; do /tmp/$d/sleep 30 & p=$!; sleep 1; if cat /proc/$p/environ >/dev/null 2>&1; then echo "$d dumpable"; else echo "$d non-dumpable"; fi; kill $p; done
/tmp/r/sleep 30 & p=$!; sleep 1; sh -c "cat /proc/$p/environ >/dev/null 2>&1 && echo child-of-plain-sh dumpable || echo child-of-plain-sh non-dumpable"; kill $p`)
	t.Logf("exec-only binaries (r: mode 0755, x: mode 0111):\n%s", m)
}

func escRandom(t *testing.T) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// escProc is a lazaret running in the background, its output collected.
type escProc struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out bytes.Buffer
}

func (p *escProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *escProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *escProc) waitFor(t *testing.T, e *backendEnv, s string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(p.output(), s) {
		if time.Now().After(deadline) {
			ps, _, _ := e.lazaret(nil, "exec", "e2e", "--", "sh", "-c", `for p in /proc/[0-9]*; do echo "$p $(tr '\0' ' ' < $p/cmdline)"; done`)
			t.Fatalf("no %q from %v:\n%s\nprocesses in the pod:\n%s", s, p.cmd.Args, p.output(), ps)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kubectlBackground starts kubectl ARGS like background.
func (e *backendEnv) kubectlBackground(stdin string, args ...string) *escProc {
	e.t.Helper()
	return e.startBackground(exec.Command(e.kubectl, append([]string{"--kubeconfig", e.kubecfg}, args...)...), stdin)
}

// background starts `lazaret --backend kubernetes ARGS` with stdin (kept
// open until the test ends) and stops it at the end of the test.
func (e *backendEnv) background(stdin string, args ...string) *escProc {
	e.t.Helper()
	return e.startBackground(exec.Command(e.bin, append([]string{"--backend", "kubernetes", "--config", e.cfg, "--workspace", e.ws, "--verbose"}, args...)...), stdin)
}

func (e *backendEnv) startBackground(cmd *exec.Cmd, stdin string) *escProc {
	p := &escProc{cmd: cmd}
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write([]byte(stdin)) }()
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = pr, p, p
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		// Killed, not stopped: a stopped session's exec stream lasts as
		// long as its orphans hold its output (the pod goes with the
		// namespace).
		_ = p.cmd.Process.Kill()
		_ = pw.Close()
		_ = p.cmd.Wait()
	})
	return p
}

// TestBackendEscalationPrompt: at a terminal, a request that is not
// auto-approved pauses the pod's output and shows the prompt on the
// session's terminal (the asking argv resolved on the host, the reason);
// A runs it on the host, D denies it (126). The delegation the holder
// read from the terminal was never echoed onto it.
func TestBackendEscalationPrompt(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true")
	e.mustLazaret(nil, "exec", "e2e", "--", "true") // claim first
	script := escClient + ` --reason "need host" -- touch "$1"; echo "rc=$?"`
	for _, c := range []struct {
		key, word, want string
		created         bool
	}{{"a", "approved-file", "rc=0", true}, {"d", "denied-file", "rc=126", false}} {
		tm := ptytest.Open(t)
		cmd := exec.Command(e.bin, "--backend", "kubernetes", "--config", e.cfg, "--workspace", e.ws, "exec", "-t", "e2e", "--", "sh", "-c", script, "sh", c.word)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tm.TTY, tm.TTY, tm.TTY
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tm.WaitFor(t, "abort lazaret")
		for _, want := range []string{"need host", "/usr/bin/touch", c.word} {
			if !tm.Shows(want) {
				t.Errorf("prompt lacks %q:\n%s", want, tm.Output())
			}
		}
		time.Sleep(prompt.MinReadable + 300*time.Millisecond) // the readability gate
		_, _ = tm.Ptmx.Write([]byte(c.key))
		tm.WaitFor(t, c.want)
		_ = cmd.Wait()
		_, err := os.Stat(filepath.Join(e.ws, c.word))
		if (err == nil) != c.created {
			t.Errorf("%s: host file exists %v, want %v\n%s", c.key, err == nil, c.created, tm.Output())
		}
		if tm.Shows(session.EnvDelegatedKey) || tm.Shows("holder-ready") {
			t.Errorf("the delegation or the marker reached the terminal:\n%q", tm.Output())
		}
	}
}
