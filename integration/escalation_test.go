//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/escalation"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// escRig is a real runsc sandbox with the escalation component prepared
// exactly as the coordinator does (socket, TLS dir, client mount, PATH);
// the test process plays the coordinator's part, so requests made by the
// real lazaret-escalate inside the sandbox reach the real server here.
type escRig struct {
	t         *testing.T
	anchor    *domain.Anchor
	comp      *escalation.Component
	container string
	sess      *session.Anchor
	prompt    *scriptedPrompter

	mu     sync.Mutex
	events []eschost.Event
}

type scriptedPrompter struct {
	mu     sync.Mutex
	asked  []escprompt.PromptRequest
	answer escprompt.Answer
}

func (p *scriptedPrompter) Prompt(ctx context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, r)
	return p.answer, nil
}

func newEscRig(t *testing.T, auto ...[]string) *escRig {
	t.Helper()
	env := NewEnv(t)
	bin := binDir(t)
	t.Setenv("LAZARET_ESCALATE", filepath.Join(bin, "lazaret-escalate"))
	// The Go client of this build too: found on PATH otherwise, where an
	// installed lazaret (make install) may be an older one, whose requests
	// this build's coordinator rightly refuses (a new signed field).
	t.Setenv("LAZARET_ESCALATE_GO", filepath.Join(bin, "lazaret-escalate-go"))
	a, err := domain.New("default", env.Workspace, env.DataRoot, filepath.Join(env.Root, "run"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.EnsurePrivateDir(a.RuntimeDir); err != nil {
		t.Fatal(err)
	}
	r := &escRig{t: t, anchor: a, prompt: &scriptedPrompter{}}
	r.comp = escalation.NewComponent(escalation.ComponentOptions{Anchor: a, AutoApprove: auto,
		Auditor: eschost.AuditFunc(func(_ context.Context, e eschost.Event) error {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
			return nil
		})})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r.container = "lazaret-esc-it-" + a.Hash
	spec := &podman.ContainerSpec{
		Name: r.container, Image: "localhost/lazaret-default:latest",
		Mounts:      []podman.Mount{{Type: "bind", Source: a.Workspace, Target: "/workspace"}},
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		Network:     "none",
		Command:     []string{"sleep", "infinity"},
	}
	if err := r.comp.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = Podman(t, "rm", "-f", "-t", "0", r.container)
		if err := r.comp.Close(context.Background()); err != nil {
			t.Errorf("component close: %v", err)
		}
		if _, err := os.Stat(a.TLSDir()); !os.IsNotExist(err) {
			t.Errorf("TLS dir left behind: %v", err)
		}
	})
	pm := &podman.Client{Runtime: filepath.Join(bin, "lazaret-runsc")}
	inv, err := pm.RunArgs(spec)
	if err != nil {
		t.Fatal(err)
	}
	run, err := pm.Cmd(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	if err := r.comp.Started(ctx, r.container); err != nil {
		t.Fatal(err)
	}
	r.waitBroker()
	r.sess, _ = session.New()
	if _, err := r.comp.Registry().Register(&eschost.Session{ID: r.sess.ID, Public: r.sess.Public, Prompt: r.prompt}); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitBroker waits until the escalation broker, started off the start
// path by Started, listens in the sandbox.
func (r *escRig) waitBroker() {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, code := r.exec(nil, "test", "-S", escalation.SandboxBrokerSocket); code == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal("the escalation broker does not listen in the sandbox")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// delegationEnv is the exec environment the CLI gives one podman exec.
func (r *escRig) delegationEnv(s *session.Anchor) []string {
	d, err := s.Delegate(r.anchor.Hash, time.Hour, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	return d.Env()
}

// exec runs argv in the sandbox with env and returns stdout, stderr, exit.
func (r *escRig) exec(env []string, argv ...string) (string, string, int) {
	r.t.Helper()
	args := []string{"exec", "-w", "/workspace"}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	args = append(append(args, r.container), argv...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return so.String(), se.String(), code
}

func (r *escRig) lastRejection() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Kind == eschost.EventRejected {
			return r.events[i].Stage
		}
	}
	return ""
}

func TestEscalationFromSandbox(t *testing.T) {
	// An entry approves exactly its argv; echo admits plain words.
	fds := []string{"readlink"}
	for i := 0; i < 10; i++ {
		fds = append(fds, "/proc/self/fd/"+strconv.Itoa(i))
	}
	r := newEscRig(t, []string{"echo", "{args}"}, []string{"false"}, []string{"cat", "/proc/self/stat"}, fds, []string{"pwd"}, []string{"make", "lint"})
	env := r.delegationEnv(r.sess)

	t.Run("sandbox is gVisor", func(t *testing.T) {
		if out, _, _ := r.exec(nil, "cat", "/proc/version"); !strings.Contains(out, "gvisor") {
			t.Fatalf("not a runsc sandbox: %q", out)
		}
	})

	t.Run("client is mounted read-only on PATH", func(t *testing.T) {
		out, _, code := r.exec(nil, "sh", "-c", "command -v lazaret-escalate; ls /run/lazaret/tls; echo x > /run/lazaret/bin/lazaret-escalate")
		if code == 0 || !strings.Contains(out, "/run/lazaret/bin/lazaret-escalate") || !strings.Contains(out, "ca.pem\nclient-key.pem\nclient.pem") {
			t.Fatalf("exit %d out %q", code, out)
		}
		if _, _, code := r.exec(nil, "sh", "-c", "echo x > /run/lazaret/bin/lazaret-escalate-go"); code == 0 {
			t.Fatal("the Go client is writable")
		}
	})

	t.Run("requests go through the broker", func(t *testing.T) {
		// The front end adds its own trace lines only when the broker
		// answered; the Go client's lines come from the broker.
		traced := append(slices.Clone(env), "LAZARET_ESCALATE_TRACE=1")
		out, errOut, code := r.exec(traced, "lazaret-escalate", "--", "echo", "via", "broker")
		if code != 0 || out != "via broker\n" || !strings.Contains(errOut, "trace fe-begin ") || !strings.Contains(errOut, "trace handshake ") {
			t.Fatalf("exit %d out %q err %q", code, out, errOut)
		}
	})

	t.Run("auto-approved command runs on the host", func(t *testing.T) {
		// pwd shows where it ran: the host workspace, not the sandbox.
		out, errOut, code := r.exec(env, "lazaret-escalate", "--reason", "it", "--", "pwd")
		if code != 0 || strings.TrimSpace(out) != r.anchor.Workspace {
			t.Fatalf("exit %d out %q err %q", code, out, errOut)
		}
		out, _, code = r.exec(env, "lazaret-escalate", "--", "echo", "hello", "from", "host")
		if code != 0 || out != "hello from host\n" {
			t.Fatalf("exit %d out %q", code, out)
		}
		if _, _, code := r.exec(env, "lazaret-escalate", "--", "false"); code != 1 {
			t.Fatalf("exit code of false: %d", code)
		}
	})

	t.Run("executed process has only fds 0-2 and no controlling terminal", func(t *testing.T) {
		probe := []string{"readlink"}
		for i := 0; i < 10; i++ {
			probe = append(probe, "/proc/self/fd/"+string(rune('0'+i)))
		}
		out, _, _ := r.exec(env, append([]string{"lazaret-escalate", "--"}, probe...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || lines[0] != "/dev/null" {
			t.Fatalf("host command saw descriptors %q", lines)
		}
		out, _, code := r.exec(env, "lazaret-escalate", "--", "cat", "/proc/self/stat")
		if code != 0 || statTTY(t, out) != "0" {
			t.Fatalf("tty_nr of the host command: %q (exit %d)", out, code)
		}
		// Positive controls: the probes do see an extra descriptor and a
		// terminal when there is one.
		f, _ := os.Open("/dev/null")
		defer f.Close()
		cmd := exec.Command(probe[0], probe[1:]...)
		cmd.ExtraFiles = []*os.File{f}
		ctl, _ := cmd.Output()
		if n := len(strings.Split(strings.TrimSpace(string(ctl)), "\n")); n != 4 {
			t.Fatalf("control: fd probe saw %d descriptors", n)
		}
		c := exec.Command("cat", "/proc/self/stat")
		ptmx, err := pty.Start(c)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(ptmx)
		_ = c.Wait()
		ptmx.Close()
		if statTTY(t, buf.String()) == "0" {
			t.Fatal("control: tty probe saw no terminal under a pty")
		}
	})

	t.Run("not approved goes to the session's prompt", func(t *testing.T) {
		n := len(r.prompt.asked)
		r.prompt.answer = escprompt.Answer{Action: escprompt.Deny}
		_, errOut, code := r.exec(env, "lazaret-escalate", "--shell", "echo a; touch /tmp/pwned", "--reason", "x")
		if code != 126 || !strings.Contains(errOut, "denied") || len(r.prompt.asked) != n+1 {
			t.Fatalf("exit %d err %q", code, errOut)
		}
		r.prompt.answer = escprompt.Answer{Action: escprompt.Approve}
		out, _, code := r.exec(env, "lazaret-escalate", "--", "echo", "--approved")
		if code != 0 || out != "--approved\n" {
			t.Fatalf("approved: exit %d out %q", code, out)
		}
	})

	t.Run("make lint: compound and appended option go to the prompt", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(r.anchor.Workspace, "Makefile"), []byte("lint:\n\t@echo linted\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		canary := filepath.Join(r.anchor.Workspace, "canary")
		if err := os.WriteFile(canary, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r.prompt.answer = escprompt.Answer{Action: escprompt.Deny}
		n := len(r.prompt.asked)
		// Control: the approved prefix alone runs without asking.
		if out, _, code := r.exec(env, "lazaret-escalate", "--", "make", "lint"); code != 0 || out != "linted\n" || len(r.prompt.asked) != n {
			t.Fatalf("make lint: exit %d out %q", code, out)
		}
		if _, _, code := r.exec(env, "lazaret-escalate", "--shell", "make lint; rm -f canary", "--reason", "x"); code != 126 {
			t.Fatalf("compound: exit %d", code)
		}
		if _, _, code := r.exec(env, "lazaret-escalate", "--", "make", "lint", "--eval=$(shell rm -f canary)"); code != 126 {
			t.Fatalf("--eval: exit %d", code)
		}
		if len(r.prompt.asked) != n+2 {
			t.Fatalf("%d prompts, want 2", len(r.prompt.asked)-n)
		}
		if _, err := os.Stat(canary); err != nil {
			t.Fatal("an injected command ran on the host")
		}
	})

	t.Run("forged requests from inside the sandbox are rejected", func(t *testing.T) {
		// Control: the genuine delegation works (above); these do not.
		other, _ := session.New()
		_, errOut, code := r.exec(r.delegationEnv(other), "lazaret-escalate", "--", "echo", "x")
		if code != 125 || r.lastRejection() != eschost.StageSession {
			t.Fatalf("unregistered session: exit %d stage %q err %q", code, r.lastRejection(), errOut)
		}
		// A delegation claiming the registered session, signed by another key.
		priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		pub, _ := priv.PublicKey.Bytes()
		d := session.Delegation{SessionID: r.sess.ID, DelegatedPub: pub, NotAfter: time.Now().Add(time.Hour).Unix(), SandboxID: r.anchor.Hash}
		od, _ := other.Delegate(r.anchor.Hash, time.Hour, time.Now())
		d.Signature = od.Delegation.Signature
		forged := (&session.Delegated{SessionID: r.sess.ID, Key: priv, Delegation: d}).Env()
		_, _, code = r.exec(forged, "lazaret-escalate", "--", "echo", "x")
		if code != 125 || r.lastRejection() != eschost.StageDelegation {
			t.Fatalf("forged delegation: exit %d stage %q", code, r.lastRejection())
		}
		// No session environment at all.
		_, errOut, code = r.exec(nil, "lazaret-escalate", "--", "echo", "x")
		if code != 125 || !strings.Contains(errOut, "LAZARET_SESSION_ID") {
			t.Fatalf("no session env: exit %d err %q", code, errOut)
		}
	})

	t.Run("rotated certificate is seen through the read-only dir mount", func(t *testing.T) {
		before, _, _ := r.exec(nil, "cat", "/run/lazaret/tls/client.pem")
		if err := r.comp.RotateNow(); err != nil {
			t.Fatal(err)
		}
		after, _, _ := r.exec(nil, "cat", "/run/lazaret/tls/client.pem")
		if before == after || !strings.Contains(after, "BEGIN CERTIFICATE") {
			t.Fatal("sandbox does not see the rotated certificate")
		}
		if out, _, code := r.exec(env, "lazaret-escalate", "--", "echo", "rotated"); code != 0 || out != "rotated\n" {
			t.Fatalf("after rotation: exit %d out %q", code, out)
		}
	})

	// Last: it kills the broker.
	t.Run("the Go client takes over when the broker is killed", func(t *testing.T) {
		kill := `for p in /proc/[0-9]*; do [ "$(readlink $p/exe)" = ` + escalation.SandboxGoClient + ` ] && kill ${p#/proc/} && echo killed; done; true`
		if out, errOut, _ := r.exec(nil, "sh", "-c", kill); !strings.Contains(out, "killed") {
			t.Fatalf("no broker process found: %q %q", out, errOut)
		}
		traced := append(slices.Clone(env), "LAZARET_ESCALATE_TRACE=1")
		out, errOut, code := r.exec(traced, "lazaret-escalate", "--", "echo", "without", "broker")
		if code != 0 || out != "without broker\n" || strings.Contains(errOut, "trace fe-begin") || !strings.Contains(errOut, "trace handshake ") {
			t.Fatalf("exit %d out %q err %q", code, out, errOut)
		}
		if _, _, code := r.exec(env, "lazaret-escalate", "--", "false"); code != 1 {
			t.Fatalf("exit code of false without the broker: %d", code)
		}
	})
}

func statTTY(t *testing.T, stat string) string {
	t.Helper()
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		t.Fatalf("bad stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 5 {
		t.Fatalf("bad stat %q", stat)
	}
	return f[4]
}

// ptySession runs `lazaret exec -t` under a PTY the test drives like a
// human at the terminal.
type ptySession struct {
	t    *testing.T
	cmd  *exec.Cmd
	ptmx *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	code int
	// drained closes when the reader of ptmx stopped: lazaret's last
	// words can still be in the terminal's buffer when it exited.
	drained chan struct{}
}

func startPTY(t *testing.T, e *Env, args ...string) *ptySession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	s := &ptySession{t: t, cmd: e.Cmd(ctx, args...), done: make(chan struct{})}
	ptmx, err := pty.StartWithSize(s.cmd, &pty.Winsize{Rows: 40, Cols: 150})
	if err != nil {
		t.Fatal(err)
	}
	s.follow(ptmx)
	return s
}

// follow makes ptmx the session's terminal: what the command writes is
// collected, its exit code kept, and both end with the test.
func (s *ptySession) follow(ptmx *os.File) {
	s.ptmx = ptmx
	s.drained = make(chan struct{})
	go func() {
		defer close(s.drained)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			s.mu.Lock()
			s.out.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		err := s.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			s.code = ee.ExitCode()
		}
		close(s.done)
	}()
	s.t.Cleanup(func() { _ = s.cmd.Process.Kill(); <-s.done; ptmx.Close() })
}

func (s *ptySession) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

func (s *ptySession) waitFor(what string) {
	s.t.Helper()
	Eventually(s.t, 2*time.Minute, "terminal to show "+strconv.Quote(what), func() bool { return strings.Contains(s.output(), what) })
}

func (s *ptySession) send(keys string) {
	if _, err := s.ptmx.Write([]byte(keys)); err != nil {
		s.t.Fatal(err)
	}
}

func (s *ptySession) exit() int {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		s.t.Fatalf("lazaret did not exit; output:\n%s", s.output())
	}
	// The terminal reads EIO once no one holds its other side; a
	// descendant that kept it open only delays the check, not fails it.
	select {
	case <-s.drained:
	case <-time.After(5 * time.Second):
	}
	return s.code
}

// TestEscalationPromptThroughPTY drives the real CLI at a real terminal:
// a request that is not auto-approved is shown on this session's terminal
// and each key does what it says.
func TestEscalationPromptThroughPTY(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("[escalation]\nauto_approve = [\"echo\"]\n")
	script := `lazaret-escalate --reason "need host" -- printf 'host %s\n' "$1"; echo "rc=$?"`
	run := func(t *testing.T, word string) *ptySession {
		s := startPTY(t, e, "exec", "-t", "--", "sh", "-c", script, "sh", word)
		s.waitFor("abort lazaret")
		waitReadable() // keys before the prompt is readable are dropped
		out := s.output()
		for _, want := range []string{"need host", "/usr/bin/printf", `"host %s\\n"`, `"` + word + `"`} {
			if !strings.Contains(out, want) {
				t.Fatalf("prompt lacks %q:\n%s", want, out)
			}
		}
		return s
	}
	t.Run("A approves", func(t *testing.T) {
		s := run(t, "approved")
		s.send("a")
		s.waitFor("rc=0")
		if !strings.Contains(s.output(), "host approved") || s.exit() != 0 {
			t.Fatalf("output:\n%s", s.output())
		}
	})
	t.Run("D denies", func(t *testing.T) {
		s := run(t, "denied")
		s.send("d")
		s.waitFor("rc=126")
		if strings.Contains(s.output(), "host denied") || !strings.Contains(s.output(), "denied by the user") {
			t.Fatalf("output:\n%s", s.output())
		}
		s.exit()
	})
	t.Run("E edits and shows again", func(t *testing.T) {
		s := run(t, "original")
		s.send("e")
		s.waitFor("edit>")
		s.send("\x15printf 'edited\\n'\r") // Ctrl-U, a new command, Enter
		s.waitFor("check it again")
		if strings.Contains(s.output(), "edited\r\n") {
			t.Fatal("edited command ran before it was approved")
		}
		waitReadable() // the edited command shown again restarts the gate
		s.send("a")
		s.waitFor("rc=0")
		if strings.Contains(s.output(), "host original") || !strings.Contains(s.output(), "edited") {
			t.Fatalf("output:\n%s", s.output())
		}
		s.exit()
	})
	t.Run("Q aborts lazaret", func(t *testing.T) {
		s := run(t, "quit")
		// Control: the filter below does find this test's sandbox.
		if out, _ := Podman(t, "ps", "-a", "--filter", "label=lazaret.data_root="+e.DataRoot, "--format", "{{.Names}}"); !strings.Contains(out, "lazaret-default-") {
			t.Fatalf("the sandbox is not found by its data_root label before Q: %q", out)
		}
		s.send("q")
		code := s.exit()
		if code == 0 || strings.Contains(s.output(), "host quit") {
			t.Fatalf("exit %d output:\n%s", code, s.output())
		}
		Eventually(t, time.Minute, "the sandbox to be gone", func() bool {
			// Only this test's sandbox: other lazaret sandboxes of the
			// same user may run beside the suite.
			out, _ := Podman(t, "ps", "-a", "--filter", "label=lazaret.data_root="+e.DataRoot, "--format", "{{.Names}}")
			return !strings.Contains(out, "lazaret-default-")
		})
		// Audited as the human's Q on that request, and the stop as
		// aborted from the prompt (the sandbox.stop entry is written once
		// the container is gone); not as a `lazaret stop`, nor as the
		// session ending.
		var trail string
		Eventually(t, time.Minute, "the sandbox stop in the audit trail", func() bool {
			trail = e.Run("audit").Stdout
			return strings.Contains(trail, "sandbox.stop") && strings.Count(trail, "sandbox.stop") == strings.Count(trail, "sandbox.start")
		})
		for _, want := range []string{`reason="aborted by the user (Q)"`, "reason=aborted from the escalation prompt"} {
			if !strings.Contains(trail, want) {
				t.Errorf("audit lacks %s:\n%s", want, trail)
			}
		}
		if strings.Contains(trail, "lazaret stop") {
			t.Errorf("the Q abort is audited as a `lazaret stop`:\n%s", trail)
		}
	})
}

// TestEscalationNoTTYDeniesAndAudits: through the real CLI without a
// terminal, an auto-approved command runs and a prompted one is denied;
// both land in the domain's audit trail with their decisions.
func TestEscalationNoTTYDeniesAndAudits(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("[escalation]\nauto_approve = [\"echo {args}\"]\n")
	r := e.Run("exec", "--", "sh", "-c", "lazaret-escalate -- echo hi; lazaret-escalate -- printf x; echo rc=$?")
	if r.Code != 0 || !strings.Contains(r.Stdout, "hi\n") || !strings.Contains(r.Stdout, "rc=126") || !strings.Contains(r.Stderr, "no terminal") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	var audit string
	Eventually(t, time.Minute, "the escalations in the audit trail", func() bool {
		res := e.Run("audit")
		audit = res.Stdout
		return res.Code == 0 && strings.Contains(audit, "escalation.result")
	})
	for _, want := range []string{"decision=auto", `rule="echo {args}"`, "argv=[printf x]", "decision=denied", "no terminal", "exit=0"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit lacks %q:\n%s", want, audit)
		}
	}
	if res := e.Run("audit", "verify"); res.Code != 0 {
		t.Fatalf("audit verify: %d %s %s", res.Code, res.Stdout, res.Stderr)
	}
}
