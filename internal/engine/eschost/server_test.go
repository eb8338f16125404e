package eschost

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/insandbox/escclient"
	"github.com/lazaret-dev/lazaret/internal/shellwords"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

const testSandbox = "abc123def456"

// rig is an in-process coordinator side: Trust Anchor, registry with one
// session, server on a temporary UNIX socket, and a recording auditor.
type rig struct {
	t      *testing.T
	anchor *trust.Anchor
	sess   *session.Anchor
	reg    *Registry
	sock   string
	ws     string
	prompt *fakePrompter
	// delegated is the delegation of the last request built.
	delegated *session.Delegated

	mu     sync.Mutex
	events []Event
}

type fakePrompter struct {
	mu     sync.Mutex
	asked  []escprompt.PromptRequest
	answer func(escprompt.PromptRequest) escprompt.Answer
}

func (f *fakePrompter) Prompt(ctx context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	f.mu.Lock()
	f.asked = append(f.asked, r)
	f.mu.Unlock()
	if f.answer == nil {
		return escprompt.Answer{Action: escprompt.Deny}, nil
	}
	return f.answer(r), nil
}

func (f *fakePrompter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

func newRig(t *testing.T, auto ...[]string) *rig {
	t.Helper()
	return newRigWith(t, nil, auto...)
}

// newRigWith is newRig with the server's configuration changed by set.
func newRigWith(t *testing.T, set func(*Config), auto ...[]string) *rig {
	t.Helper()
	base := t.TempDir()
	a, err := trust.Start(trust.Options{Dir: filepath.Join(base, "tls"), Profile: "claude", SandboxID: testSandbox})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	r := &rig{t: t, anchor: a, reg: NewRegistry(), ws: filepath.Join(base, "ws"), prompt: &fakePrompter{}}
	if err := os.MkdirAll(filepath.Join(r.ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.sess, _ = session.New()
	if _, err := r.reg.Register(&Session{ID: r.sess.ID, Public: r.sess.Public, Prompt: r.prompt,
		Command: []string{"shell"}, PID: 4242, Started: time.Unix(2e9, 0)}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Profile: "claude", SandboxID: testSandbox, Workspace: r.ws, Registry: r.reg,
		Policy:   &Policy{AutoApprove: auto, Path: "/usr/bin:/bin", Workspace: r.ws},
		Executor: &Executor{Env: MinimalEnv("/usr/bin:/bin", "/", "")},
		Auditor: AuditFunc(func(_ context.Context, e Event) error {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
			return nil
		}),
	}
	if set != nil {
		set(&cfg)
	}
	srv := NewServer(cfg, a.ServerConfig())
	r.sock = filepath.Join(base, "esc.sock")
	ln, err := net.Listen("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// env is the sandbox environment of one exec of the rig's session.
func (r *rig) env() map[string]string {
	d, err := r.sess.Delegate(testSandbox, time.Hour, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	m := map[string]string{escclient.EnvSocket: r.sock, escclient.EnvTLSDir: r.anchor.Dir(), escclient.EnvCwd: "/workspace"}
	for _, kv := range d.Env() {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// escalate runs lazaret-escalate's code in-process.
func (r *rig) escalate(env map[string]string, args ...string) (int, string, string) {
	var so, se bytes.Buffer
	code := escclient.Main(append([]string{"lazaret-escalate"}, args...), func(k string) string { return env[k] }, &so, &se)
	return code, so.String(), se.String()
}

// lastRejection returns the stage of the most recent rejection event. A
// TLS failure reaches the client before the server has audited it, so it
// waits (bounded) for the event to arrive.
func (r *rig) lastRejection() string {
	for i := 0; i < 500; i++ {
		r.mu.Lock()
		for i := len(r.events) - 1; i >= 0; i-- {
			if r.events[i].Kind == EventRejected {
				r.mu.Unlock()
				return r.events[i].Stage
			}
		}
		r.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	return ""
}

func (r *rig) eventCount(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func TestAutoApprovedRunsAndReturnsOutput(t *testing.T) {
	r := newRig(t, []string{"echo", shellwords.ArgsPlaceholder}, []string{"false"})
	code, out, errOut := r.escalate(r.env(), "--reason", "test", "--", "echo", "hello", "world")
	if code != 0 || out != "hello world\n" {
		t.Fatalf("exit %d out %q err %q", code, out, errOut)
	}
	if code, _, _ := r.escalate(r.env(), "--", "false"); code != 1 {
		t.Fatalf("false: exit %d", code)
	}
	if r.prompt.count() != 0 {
		t.Fatal("auto-approved commands were prompted")
	}
	if r.eventCount(EventRequest) != 2 || r.eventCount(EventResult) != 2 {
		t.Fatalf("audit: %+v", r.events)
	}
}

func TestShellFormParsedNotShelled(t *testing.T) {
	// An exact entry whose words only quoting can express.
	r := newRig(t, []string{"echo", "a  b", "c"})
	code, out, errOut := r.escalate(r.env(), "--shell", `echo 'a  b' "c"`, "--reason", "x")
	if code != 0 || out != "a  b c\n" {
		t.Fatalf("exit %d out %q err %q", code, out, errOut)
	}
}

func TestCwdMapsIntoWorkspace(t *testing.T) {
	r := newRig(t, []string{"pwd"})
	req := r.request([]string{"pwd"})
	req.Cwd = "/workspace/sub"
	req.Sign(r.delegated.Key)
	code, out, _ := r.send(r.anchor.Dir(), req)
	real, _ := filepath.EvalSymlinks(filepath.Join(r.ws, "sub"))
	if code != 0 || strings.TrimSpace(out) != real {
		t.Fatalf("pwd %q exit %d, want %s", out, code, real)
	}
	// A directory only the sandbox has: the workspace root, and a prompt
	// even for an auto-approved command.
	req = r.request([]string{"pwd"})
	req.Cwd = "/workspace/only-in-sandbox"
	req.Sign(r.delegated.Key)
	if code, _, _ := r.send(r.anchor.Dir(), req); code != escclient.ExitDenied || r.prompt.count() != 1 ||
		!strings.Contains(r.prompt.asked[0].Reason, "no counterpart") {
		t.Fatalf("missing cwd: exit %d prompts %d", code, r.prompt.count())
	}
	// A symlink out of the workspace is refused (os.Root).
	if err := os.Symlink("/etc", filepath.Join(r.ws, "out")); err != nil {
		t.Fatal(err)
	}
	req = r.request([]string{"pwd"})
	req.Cwd = "/workspace/out"
	req.Sign(r.delegated.Key)
	if code, out, _ := r.send(r.anchor.Dir(), req); code != -1 || strings.Contains(out, "/etc") {
		t.Fatalf("escaping cwd: exit %d out %q", code, out)
	}
}

func TestPromptDecisions(t *testing.T) {
	r := newRig(t)
	// Deny.
	code, _, errOut := r.escalate(r.env(), "--reason", "why", "--", "echo", "x")
	if code != escclient.ExitDenied || !strings.Contains(errOut, "denied by the user") {
		t.Fatalf("deny: exit %d err %q", code, errOut)
	}
	got := r.prompt.asked[0]
	if got.Justification != "why" || got.Executable != "/usr/bin/echo" || got.Profile != "claude" || len(got.RequestID) != 32 {
		t.Fatalf("prompt request %+v", got)
	}
	// The prompt names the session that asked.
	if !slices.Equal(got.SessionCommand, []string{"shell"}) || got.SessionPID != 4242 || !got.SessionStarted.Equal(time.Unix(2e9, 0)) {
		t.Fatalf("prompt does not name the session: %+v", got)
	}
	// Approve.
	r.prompt.answer = func(escprompt.PromptRequest) escprompt.Answer { return escprompt.Answer{Action: escprompt.Approve} }
	if code, out, _ := r.escalate(r.env(), "--", "echo", "approved"); code != 0 || out != "approved\n" {
		t.Fatalf("approve: exit %d out %q", code, out)
	}
	// Edit then approve: the edited argv runs.
	r.prompt.answer = func(escprompt.PromptRequest) escprompt.Answer {
		return escprompt.Answer{Action: escprompt.Approve, Argv: []string{"echo", "edited"}, Executable: "/usr/bin/echo"}
	}
	// The agent is told the command was edited and what ran instead.
	if code, out, errOut := r.escalate(r.env(), "--", "echo", "original"); code != 0 || out != "edited\n" ||
		!strings.Contains(errOut, `the user edited the command; running ["echo" "edited"]`) {
		t.Fatalf("edit: exit %d out %q err %q", code, out, errOut)
	}
	// An edit whose resolution differs from what the human saw is refused.
	r.prompt.answer = func(escprompt.PromptRequest) escprompt.Answer {
		return escprompt.Answer{Action: escprompt.Approve, Argv: []string{"echo", "x"}, Executable: "/usr/bin/true"}
	}
	if code, _, _ := r.escalate(r.env(), "--", "echo", "original"); code != escclient.ExitDenied {
		t.Fatalf("mismatched edit: exit %d", code)
	}
	// Abort.
	r.prompt.answer = func(escprompt.PromptRequest) escprompt.Answer { return escprompt.Answer{Action: escprompt.Abort} }
	if code, _, errOut := r.escalate(r.env(), "--", "echo", "x"); code != escclient.ExitDenied || !strings.Contains(errOut, "denied: "+ReasonAbortedByUser) {
		t.Fatalf("abort: exit %d err %q", code, errOut)
	}
	// An unparsable command can never be approved as it is.
	r.prompt.answer = func(escprompt.PromptRequest) escprompt.Answer { return escprompt.Answer{Action: escprompt.Approve} }
	if code, _, _ := r.escalate(r.env(), "--shell", "echo a; echo b", "--reason", "x"); code != escclient.ExitDenied {
		t.Fatalf("approve of a compound command: exit %d", code)
	}
}

func TestNoPrompterDenies(t *testing.T) {
	r := newRig(t)
	other, _ := session.New()
	if _, err := r.reg.Register(&Session{ID: other.ID, Public: other.Public}); err != nil {
		t.Fatal(err)
	}
	r.sess = other
	if code, _, _ := r.escalate(r.env(), "--", "echo", "x"); code != escclient.ExitDenied {
		t.Fatalf("exit %d", code)
	}
}

// TestNoTerminalSaysSoUpFront: a session whose CLI has no terminal
// (`lazaret exec` without -t answers every prompt at once with a denial)
// gets only that denial, never "waiting for approval on the lazaret
// terminal" first (it printed that, then "denied: no terminal", rc 126);
// a session with no prompter at all is told there is no terminal to ask
// and audited. Control: a prompt that takes longer than PendingDelay, as
// a human's does, is announced.
func TestNoTerminalSaysSoUpFront(t *testing.T) {
	r := newRig(t)
	r.prompt.answer = func(escprompt.PromptRequest) escprompt.Answer {
		return escprompt.Answer{Action: escprompt.Deny, Reason: "no terminal to ask on (run lazaret shell, or lazaret exec -t, at a terminal)"}
	}
	code, _, errOut := r.escalate(r.env(), "--", "echo", "x")
	if code != escclient.ExitDenied || strings.Contains(errOut, "waiting") || !strings.Contains(errOut, "denied: no terminal to ask on") || r.prompt.count() != 1 {
		t.Fatalf("exit %d, prompts %d, stderr %q", code, r.prompt.count(), errOut)
	}
	r.prompt.answer = func(escprompt.PromptRequest) escprompt.Answer {
		time.Sleep(2 * PendingDelay)
		return escprompt.Answer{Action: escprompt.Deny}
	}
	if code, _, errOut = r.escalate(r.env(), "--", "echo", "x"); code != escclient.ExitDenied || !strings.Contains(errOut, "waiting for approval on the lazaret terminal") {
		t.Fatalf("control: exit %d, stderr %q", code, errOut)
	}
	other, _ := session.New()
	if _, err := r.reg.Register(&Session{ID: other.ID, Public: other.Public}); err != nil {
		t.Fatal(err)
	}
	r.sess = other
	code, _, errOut = r.escalate(r.env(), "--", "echo", "x")
	if code != escclient.ExitDenied || strings.Contains(errOut, "waiting") || !strings.Contains(errOut, "no terminal to ask for approval") {
		t.Fatalf("no prompter: exit %d, stderr %q", code, errOut)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.events[len(r.events)-1]
	if last.Kind != EventDecision || last.Decision != DecisionDenied || last.Reason != ErrNoPrompter.Error() {
		t.Fatalf("audited %+v", last)
	}
}

// TestCompoundAndInjectionGoToPrompt: the two policy cases of the issue,
// end to end, with `make lint` auto-approved; the positive control is that
// plain `make lint` is not prompted.
func TestCompoundAndInjectionGoToPrompt(t *testing.T) {
	r := newRig(t, []string{"make", "lint"})
	if err := os.WriteFile(filepath.Join(r.ws, "Makefile"), []byte("lint:\n\t@echo linted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := r.escalate(r.env(), "--", "make", "lint")
	if code != 0 || out != "linted\n" || r.prompt.count() != 0 {
		t.Fatalf("control: make lint exit %d out %q prompts %d", code, out, r.prompt.count())
	}
	canary := filepath.Join(r.ws, "canary")
	os.WriteFile(canary, nil, 0o644)
	if code, _, _ := r.escalate(r.env(), "--shell", "make lint; rm -f canary", "--reason", "x"); code != escclient.ExitDenied {
		t.Fatalf("compound: exit %d", code)
	}
	if code, _, _ := r.escalate(r.env(), "--", "make", "lint", "--eval=$(shell touch pwned)"); code != escclient.ExitDenied {
		t.Fatalf("injection: exit %d", code)
	}
	if r.prompt.count() != 2 {
		t.Fatalf("prompts %d, want 2", r.prompt.count())
	}
	if _, err := os.Stat(canary); err != nil {
		t.Fatal("compound command ran")
	}
	if _, err := os.Stat(filepath.Join(r.ws, "pwned")); err == nil {
		t.Fatal("injected argument ran")
	}
}

func TestMissingEnvAndSocket(t *testing.T) {
	r := newRig(t)
	code, _, errOut := r.escalate(map[string]string{}, "--", "true")
	if code != escclient.ExitFailure || !strings.Contains(errOut, "LAZARET_SESSION_ID") {
		t.Fatalf("no session: %d %q", code, errOut)
	}
	env := r.env()
	env[escclient.EnvTLSDir] = t.TempDir()
	if code, _, errOut := r.escalate(env, "--", "true"); code != escclient.ExitFailure || !strings.Contains(errOut, "TLS material missing") {
		t.Fatalf("no certs: %d %q", code, errOut)
	}
	env = r.env()
	env[escclient.EnvSocket] = filepath.Join(t.TempDir(), "none.sock")
	if code, _, errOut := r.escalate(env, "--", "true"); code != escclient.ExitFailure || !strings.Contains(errOut, "cannot reach the coordinator") {
		t.Fatalf("no socket: %d %q", code, errOut)
	}
	if code, _, _ := r.escalate(env); code != escclient.ExitUsage {
		t.Fatalf("usage: %d", code)
	}
	if code, _, _ := r.escalate(env, "--shell", "x"); code != escclient.ExitUsage {
		t.Fatalf("--shell without reason: %d", code)
	}
}

// --- crafted requests -------------------------------------------------

// request builds a signed request from the rig's session (fields can be
// changed and re-signed by the caller).
func (r *rig) request(argv []string) *escwire.Request {
	d, _ := r.sess.Delegate(testSandbox, time.Hour, time.Now())
	r.delegated = d
	req := &escwire.Request{RequestID: escwire.RandomID(), SessionID: r.sess.ID, Profile: "claude", Cwd: "/workspace",
		Argv: argv, Justification: "j", Timestamp: time.Now().UnixMilli(), Nonce: escwire.RandomID(), Delegation: d.Delegation}
	req.Sign(d.Key)
	return req
}

// send sends req with the client certificate of tlsDir; code -1 means the
// request was refused (error frame or TLS failure).
func (r *rig) send(tlsDir string, req *escwire.Request) (int, string, error) {
	cfg, _, err := trust.ClientConfig(tlsDir)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.sendWith(cfg, req)
}

func (r *rig) sendWith(cfg *tls.Config, req *escwire.Request) (int, string, error) {
	line, _ := req.Encode()
	return r.sendLine(cfg, line)
}

func (r *rig) sendLine(cfg *tls.Config, line []byte) (int, string, error) {
	var so, se bytes.Buffer
	code, err := escclient.Exchange(context.Background(), r.sock, cfg, line, &so, &se)
	if err != nil {
		return -1, so.String(), err
	}
	return code, so.String(), nil
}

func (r *rig) clientCert(san string, notBefore, notAfter time.Time, ca *trust.CA) *tls.Config {
	iss, err := ca.IssueClient(san, notBefore, notAfter)
	if err != nil {
		r.t.Fatal(err)
	}
	return trust.ClientConfigFor(r.anchor.CA().Pool(), iss.TLS)
}

// TestRejections is the rejection list of the issue. Each case is first
// run unmodified (positive control: accepted) and then with the attack
// (refused at the expected stage, nothing run, generic error only).
func TestRejections(t *testing.T) {
	now := time.Now()
	other, _ := session.New()
	foreignCA, _ := trust.NewCA(time.Hour, nil)
	for _, tc := range []struct {
		name   string
		stage  string
		attack func(r *rig, req *escwire.Request) (*tls.Config, []byte)
	}{
		{"cert from another CA", StageMTLS, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			return r.clientCert(r.anchor.SAN(), now.Add(-time.Minute), now.Add(time.Hour), foreignCA), nil
		}},
		{"cert of another sandbox's SAN", StageMTLS, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			return r.clientCert(trust.SAN("claude", "000000000000"), now.Add(-time.Minute), now.Add(time.Hour), r.anchor.CA()), nil
		}},
		{"expired cert", StageMTLS, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			return r.clientCert(r.anchor.SAN(), now.Add(-time.Hour), now.Add(-time.Minute), r.anchor.CA()), nil
		}},
		{"no delegation", StageDelegation, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			req.Delegation = session.Delegation{}
			req.Sign(r.delegated.Key)
			return nil, nil
		}},
		{"forged delegation", StageDelegation, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			// A delegation claiming the victim session: other signs a
			// delegation of its own, whose signature and key are then
			// presented as the victim's; the request is signed with that key.
			od, _ := other.Delegate(testSandbox, time.Hour, now)
			req.Delegation = session.Delegation{SessionID: r.sess.ID, DelegatedPub: od.Delegation.DelegatedPub,
				NotAfter: od.Delegation.NotAfter, SandboxID: testSandbox, Signature: od.Delegation.Signature}
			req.Sign(od.Key)
			return nil, nil
		}},
		{"expired delegation", StageDelegation, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			d, _ := r.sess.Delegate(testSandbox, time.Minute, now.Add(-time.Hour))
			req.Delegation = d.Delegation
			req.Sign(d.Key)
			return nil, nil
		}},
		{"delegation for another sandbox", StageDelegation, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			d, _ := r.sess.Delegate("000000000000", time.Hour, now)
			req.Delegation = d.Delegation
			req.Sign(d.Key)
			return nil, nil
		}},
		{"unknown session", StageSession, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			d, _ := other.Delegate(testSandbox, time.Hour, now)
			req.SessionID, req.Delegation = other.ID, d.Delegation
			req.Sign(d.Key)
			return nil, nil
		}},
		{"signature by another session's key", StageSignature, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			d, _ := other.Delegate(testSandbox, time.Hour, now)
			req.Sign(d.Key)
			return nil, nil
		}},
		{"field modified after signing", StageSignature, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			req.Argv = []string{"echo", "evil"}
			return nil, nil
		}},
		{"justification modified after signing", StageSignature, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			req.Justification = "harmless"
			return nil, nil
		}},
		{"stale timestamp", StageReplay, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			req.Timestamp = now.Add(-31 * time.Second).UnixMilli()
			req.Sign(r.delegated.Key)
			return nil, nil
		}},
		{"wrong profile", StageDecode, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			req.Profile = "other"
			req.Sign(r.delegated.Key)
			return nil, nil
		}},
		{"unknown field", StageDecode, func(r *rig, req *escwire.Request) (*tls.Config, []byte) {
			line, _ := req.Encode()
			return nil, append(line[:len(line)-2], []byte(`,"env":{"LD_PRELOAD":"x"}}`+"\n")...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, []string{"echo", shellwords.ArgsPlaceholder})
			// Positive control.
			req := r.request([]string{"echo", "ran"})
			if code, out, err := r.send(r.anchor.Dir(), req); code != 0 || out != "ran\n" {
				t.Fatalf("control refused: %d %q %v", code, out, err)
			}
			req = r.request([]string{"echo", "ran"})
			cfg, line := tc.attack(r, req)
			if cfg == nil {
				cfg, _, _ = trust.ClientConfig(r.anchor.Dir())
			}
			if line == nil {
				line, _ = req.Encode()
			}
			code, out, err := r.sendLine(cfg, line)
			if code != -1 || out != "" {
				t.Fatalf("attack accepted: exit %d out %q", code, out)
			}
			if tc.stage != StageMTLS && err.Error() != escwire.GenericRejection {
				t.Fatalf("sandbox learned more than the generic error: %v", err)
			}
			if got := r.lastRejection(); got != tc.stage {
				t.Fatalf("rejected at stage %q, want %q", got, tc.stage)
			}
		})
	}
}

func TestReplayRejected(t *testing.T) {
	r := newRig(t, []string{"echo", shellwords.ArgsPlaceholder})
	req := r.request([]string{"echo", "once"})
	line, _ := req.Encode()
	cfg, _, _ := trust.ClientConfig(r.anchor.Dir())
	if code, out, err := r.sendLine(cfg, line); code != 0 || out != "once\n" {
		t.Fatalf("first: %d %q %v", code, out, err)
	}
	if code, _, _ := r.sendLine(cfg, line); code != -1 || r.lastRejection() != StageReplay {
		t.Fatalf("replay accepted: %d", code)
	}
	// Same nonce, new request id.
	req2 := r.request([]string{"echo", "twice"})
	req2.Nonce = req.Nonce
	req2.Sign(r.delegated.Key)
	if code, _, _ := r.sendWith(cfg, req2); code != -1 || r.lastRejection() != StageReplay {
		t.Fatalf("nonce reuse accepted: %d", code)
	}
}

func TestUnregisteredSessionRejected(t *testing.T) {
	r := newRig(t, []string{"echo", shellwords.ArgsPlaceholder})
	env := r.env()
	if code, _, _ := r.escalate(env, "--", "echo"); code != 0 {
		t.Fatal("control failed")
	}
	// The CLI disconnects: its delegations die with it.
	s, _ := r.reg.Lookup(r.sess.ID)
	r.reg.mu.Lock()
	delete(r.reg.m, s.ID)
	r.reg.mu.Unlock()
	if code, _, _ := r.escalate(env, "--", "echo"); code != escclient.ExitFailure || r.lastRejection() != StageSession {
		t.Fatalf("exit %d stage %q", code, r.lastRejection())
	}
}

// blockingPrompter never answers; it reports when its requester went away.
type blockingPrompter struct {
	gone   chan struct{}
	reason string // why the request ended, as the prompter was told
}

func (b *blockingPrompter) Prompt(ctx context.Context, _ escprompt.PromptRequest) (escprompt.Answer, error) {
	<-ctx.Done()
	b.reason = escprompt.WithdrawReason(ctx)
	close(b.gone)
	return escprompt.Answer{Action: escprompt.Deny}, &escprompt.Withdrawn{Reason: b.reason}
}

// TestClientTimeoutWithdrawsPrompt: --timeout ends the client with 124 and
// the coordinator withdraws the pending prompt.
func TestClientTimeoutWithdrawsPrompt(t *testing.T) {
	r := newRig(t)
	bp := &blockingPrompter{gone: make(chan struct{})}
	other, _ := session.New()
	if _, err := r.reg.Register(&Session{ID: other.ID, Public: other.Public, Prompt: bp}); err != nil {
		t.Fatal(err)
	}
	r.sess = other
	code, _, errOut := r.escalate(r.env(), "--timeout", "300ms", "--", "echo", "x")
	if code != escclient.ExitTimeout || !strings.Contains(errOut, "no answer within") {
		t.Fatalf("exit %d err %q", code, errOut)
	}
	select {
	case <-bp.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("prompt not withdrawn after the client gave up")
	}
	// The prompt is told why (its client went away), and the audit
	// records the withdrawal and the terminal it was on, not a bare
	// "context canceled".
	if bp.reason != escprompt.WithdrawClientGone {
		t.Fatalf("withdrawn with reason %q", bp.reason)
	}
	want := escprompt.WithdrawnLine(escprompt.WithdrawClientGone)
	deadline := time.Now().Add(5 * time.Second)
	for !func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.events {
			if e.Kind == EventDecision && e.Reason == want && e.AskedOn == "terminal of session "+other.ID {
				return true
			}
		}
		return false
	}() {
		if time.Now().After(deadline) {
			r.mu.Lock()
			t.Fatalf("no audited withdrawal: %+v", r.events)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPromptQueueIsBounded: requests beyond MaxPendingPrompt waiting for
// the human are denied at once instead of queueing.
func TestPromptQueueIsBounded(t *testing.T) {
	r := newRig(t)
	other, _ := session.New()
	r.reg.Register(&Session{ID: other.ID, Public: other.Public, Prompt: countingBlocker{}})
	r.sess = other
	env := r.env()
	for i := 0; i < MaxPendingPrompt; i++ {
		go func() {
			var so, se bytes.Buffer
			escclient.Main([]string{"lazaret-escalate", "--", "echo", "x"}, func(k string) string { return env[k] }, &so, &se)
		}()
	}
	for i := 0; ; i++ {
		if blocked.Load() == MaxPendingPrompt {
			break
		}
		if i > 1000 {
			t.Fatalf("%d prompts pending, want %d", blocked.Load(), MaxPendingPrompt)
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, _, errOut := r.escalate(r.env(), "--", "echo", "x")
	if code != escclient.ExitDenied || !strings.Contains(errOut, "too many") {
		t.Fatalf("exit %d err %q", code, errOut)
	}
}

var blocked atomic.Int32

// countingBlocker holds every prompt until its requester goes away.
type countingBlocker struct{}

func (countingBlocker) Prompt(ctx context.Context, _ escprompt.PromptRequest) (escprompt.Answer, error) {
	blocked.Add(1)
	defer blocked.Add(-1)
	<-ctx.Done()
	return escprompt.Answer{Action: escprompt.Deny}, ctx.Err()
}

// An authenticated connection that ends before sending a byte (the
// broker's warm connection lapsing) asked nothing and is not audited as a
// rejection; one that sends anything is decoded and judged (the positive
// control: a stray byte is a rejection).
func TestServerConnectionWithoutRequestIsNotARejection(t *testing.T) {
	r := newRig(t)
	cfg, _, err := trust.ClientConfig(r.anchor.Dir())
	if err != nil {
		t.Fatal(err)
	}
	handshake := func() *tls.Conn {
		t.Helper()
		raw, err := net.Dial("unix", r.sock)
		if err != nil {
			t.Fatal(err)
		}
		c := tls.Client(raw, cfg)
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := handshake()
	c.Close()
	time.Sleep(200 * time.Millisecond)
	if n := r.eventCount(EventRejected); n != 0 {
		t.Errorf("a connection closed without a request was audited: %d rejections", n)
	}
	c = handshake()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if stage := r.lastRejection(); stage != StageDecode {
		t.Errorf("a stray byte: rejection stage %q, want %q", stage, StageDecode)
	}
}

// A peer that hangs up in the middle of the handshake (a signer killed
// with its session while it prepared a warm connection) asked nothing:
// no rejection. A client with a certificate of another CA is still one
// (positive control).
func TestServerAbandonedHandshakeIsNotARejection(t *testing.T) {
	r := newRig(t)
	raw, err := net.Dial("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	// A ClientHello's first bytes, then nothing.
	if _, err := raw.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x40, 0x01}); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	time.Sleep(200 * time.Millisecond)
	if n := r.eventCount(EventRejected); n != 0 {
		t.Errorf("an abandoned handshake was audited: %d rejections", n)
	}
	other, err := trust.NewCA(time.Hour, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _ = r.sendWith(r.clientCert(trust.SAN("claude", testSandbox), time.Now().Add(-time.Minute), time.Now().Add(time.Hour), other), r.request([]string{"true"}))
	if stage := r.lastRejection(); stage != StageMTLS {
		t.Errorf("a certificate of another CA: rejection stage %q, want %q", stage, StageMTLS)
	}
}
