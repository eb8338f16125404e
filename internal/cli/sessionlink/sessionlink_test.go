package sessionlink

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/coordinator/escalation"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/insandbox/escclient"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// coordinator runs the escalation component behind a real control socket.
func coordinator(t *testing.T) (*escalation.Component, *domain.Anchor, string) {
	t.Helper()
	return coordinatorWith(t, nil, nil)
}

// coordinatorWith is coordinator with an auditor and extra handlers
// registered on the control socket.
func coordinatorWith(t *testing.T, aud eschost.Auditor, handlers map[string]ctlserver.HandlerFunc) (*escalation.Component, *domain.Anchor, string) {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	os.MkdirAll(ws, 0o755)
	t.Setenv("LAZARET_ESCALATE", "/bin/true") // mounted into the sandbox; unused here
	t.Setenv("LAZARET_ESCALATE_GO", "/bin/true")
	a, err := domain.New("claude", ws, filepath.Join(base, "data"), filepath.Join(base, "run"), "")
	if err != nil {
		t.Fatal(err)
	}
	srv := ctlserver.NewServer(os.Getuid(), nil)
	for typ, h := range handlers {
		srv.Handle(typ, h)
	}
	comp := escalation.NewComponent(escalation.ComponentOptions{Anchor: a, Server: srv, Auditor: aud})
	if err := comp.Prepare(context.Background(), &podman.ContainerSpec{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { comp.Close(context.Background()) })
	sock := filepath.Join(base, "ctl.sock")
	ln, err := ctlserver.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return comp, a, sock
}

// attach is one CLI: a link on its own terminal, attached and registered.
// readable waits until a prompt just shown is readable: the readability
// gate drops every key before (prompt.MinReadable after its frame).
func readable() { time.Sleep(prompt.MinReadable + 200*time.Millisecond) }

// typeAnswer types key on ptmx and returns the request's exit code. A key the
// readability gate took for typed ahead (a loaded machine can draw the
// prompt later than the text shows) is dropped, as a human's would be:
// the key is typed again every 2 s, as the human would, for at most 30 s.
func typeAnswer(t *testing.T, done <-chan int, ptmx *os.File, key string) int {
	t.Helper()
	for range 15 {
		ptmx.Write([]byte(key))
		select {
		case code := <-done:
			return code
		case <-time.After(2 * time.Second):
		}
	}
	t.Fatalf("no answer to %q within 30 s", key)
	return -1
}

func attach(t *testing.T, sock string, tty *os.File) *Link {
	t.Helper()
	l, err := New(Options{TTY: tty})
	if err != nil {
		t.Fatal(err)
	}
	c := ctl.NewClient(nil)
	l.Install(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Connect(ctx, sock, ctl.Hello{Session: &ctl.SessionInfo{ID: l.SessionID(), PID: os.Getpid(), Profile: "claude"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); l.Close() })
	if err := l.Register(ctx, c); err != nil {
		t.Fatal(err)
	}
	return l
}

// execEnv adds a fresh delegation, key included, to env: the way a Go
// client runs with no session holder in front of it.
func execEnv(l *Link, env map[string]string) {
	d, err := l.delegate()
	if d == nil || err != nil {
		return
	}
	for _, kv := range d.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
}

func escalate(a *domain.Anchor, l *Link, args ...string) chan int {
	env := map[string]string{escclient.EnvSocket: a.EscalationSocket(), escclient.EnvTLSDir: a.TLSDir(), escclient.EnvCwd: "/workspace"}
	execEnv(l, env)
	ch := make(chan int, 1)
	go func() {
		var so, se bytes.Buffer
		ch <- escclient.Main(append([]string{"lazaret-escalate"}, args...), func(k string) string { return env[k] }, &so, &se)
	}()
	return ch
}

// TestPromptGoesOnlyToTheRequestingSession: two CLIs attached to one
// coordinator, each with its own terminal; a request signed with A's
// delegation is shown on A's terminal and never on B's, and A's key
// decides it. Then the same from B (the control: B's terminal can show
// prompts).
func TestPromptGoesOnlyToTheRequestingSession(t *testing.T) {
	_, a, sock := coordinator(t)
	ta, tb := ptytest.Open(t), ptytest.Open(t)
	la, lb := attach(t, sock, ta.TTY), attach(t, sock, tb.TTY)

	done := escalate(a, la, "--reason", "from A", "--", "echo", "x")
	for i := 0; !ta.Shows("abort lazaret"); i++ {
		if i > 1000 {
			t.Fatal("prompt never shown on A's terminal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tb.Shows("from A") || tb.Shows("abort lazaret") {
		t.Fatal("A's request shown on B's terminal")
	}
	readable()
	tb.Ptmx.Write([]byte("a")) // B's human cannot answer A's request
	if code := typeAnswer(t, done, ta.Ptmx, "d"); code != escclient.ExitDenied {
		t.Fatalf("exit %d, want A's denial", code)
	}

	done = escalate(a, lb, "--reason", "from B", "--", "echo", "x")
	for i := 0; !tb.Shows("from B"); i++ {
		if i > 1000 {
			t.Fatal("control: prompt never shown on B's terminal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	readable()
	if code := typeAnswer(t, done, tb.Ptmx, "a"); code != 0 {
		t.Fatalf("B approved: exit %d", code)
	}
	if ta.Shows("from B") {
		t.Fatal("B's request shown on A's terminal")
	}
}

// TestUnregisteredAfterDisconnect: a CLI that goes away takes its session
// and every delegation it issued with it.
func TestUnregisteredAfterDisconnect(t *testing.T) {
	comp, a, sock := coordinator(t)
	l, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := ctl.NewClient(nil)
	ctx := context.Background()
	if err := c.Connect(ctx, sock, ctl.Hello{Session: &ctl.SessionInfo{ID: l.SessionID(), PID: os.Getpid(), Profile: "claude"}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Register(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, ok := comp.Registry().Lookup(l.SessionID()); !ok {
		t.Fatal("not registered")
	}
	c.Close()
	for i := 0; ; i++ {
		if _, ok := comp.Registry().Lookup(l.SessionID()); !ok {
			break
		}
		if i > 1000 {
			t.Fatal("session still registered after its CLI disconnected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := <-escalate(a, l, "--", "echo", "x"); code != escclient.ExitFailure {
		t.Fatalf("delegation of a gone session: exit %d", code)
	}
}

func TestRegisterRequiresAttachedSession(t *testing.T) {
	_, _, sock := coordinator(t)
	l, _ := New(Options{})
	c := ctl.NewClient(nil)
	if err := c.Connect(context.Background(), sock, ctl.Hello{}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := l.Register(context.Background(), c); err == nil {
		t.Fatal("registration without an attached session accepted")
	}
}

func TestDisabledCoordinator(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	srv := ctlserver.NewServer(os.Getuid(), nil)
	ln, err := ctlserver.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	l, _ := New(Options{})
	c := ctl.NewClient(nil)
	if err := c.Connect(context.Background(), sock, ctl.Hello{Session: &ctl.SessionInfo{ID: l.SessionID(), Profile: "claude"}}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := l.Register(context.Background(), c); err != ErrDisabled {
		t.Fatalf("Register = %v, want ErrDisabled", err)
	}
	env := map[string]string{}
	if f, err := l.ExecDelegation(env); f != nil || err != nil || len(env) != 0 {
		t.Fatalf("delegation without escalation: %v %v %v", f, env, err)
	}
}

// recorder is an eschost.Auditor keeping the decisions.
type recorder struct {
	mu        sync.Mutex
	decisions []eschost.Event
}

func (r *recorder) Audit(_ context.Context, e eschost.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Kind == eschost.EventDecision {
		r.decisions = append(r.decisions, e)
	}
	return nil
}

// TestQStopsAsAborted: the human's Q at a prompt is audited as their
// denial of that request ("aborted by the user (Q)") and the sandbox stop
// the CLI asks for carries the escalation-abort cause, not a plain
// `lazaret stop`. Control: a D answer denies without asking for a stop.
func TestQStopsAsAborted(t *testing.T) {
	aud := &recorder{}
	stops := make(chan ctl.StopRequest, 4)
	_, a, sock := coordinatorWith(t, aud, map[string]ctlserver.HandlerFunc{
		ctl.TypeStop: func(_ context.Context, r *ctlserver.Request) (any, error) {
			var sr ctl.StopRequest
			if err := r.Decode(&sr); err != nil {
				return nil, err
			}
			stops <- sr
			return struct{}{}, nil
		},
	})
	tm := ptytest.Open(t)
	l := attach(t, sock, tm.TTY)
	answer := func(key string) int {
		t.Helper()
		tm.Reset()
		done := escalate(a, l, "--reason", "r", "--", "echo", "x")
		for i := 0; !tm.Shows("abort lazaret"); i++ {
			if i > 1000 {
				t.Fatal("prompt never shown")
			}
			time.Sleep(10 * time.Millisecond)
		}
		readable()
		return typeAnswer(t, done, tm.Ptmx, key)
	}
	if code := answer("d"); code != escclient.ExitDenied {
		t.Fatalf("d: exit %d", code)
	}
	if code := answer("q"); code != escclient.ExitDenied {
		t.Fatalf("q: exit %d", code)
	}
	select {
	case sr := <-stops:
		if sr.Cause != ctl.StopCauseEscalationAbort {
			t.Fatalf("stop cause %q, want %q", sr.Cause, ctl.StopCauseEscalationAbort)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Q did not ask the coordinator to stop")
	}
	if len(stops) != 0 {
		t.Fatalf("more than one stop (the D answer asked for one?)")
	}
	aud.mu.Lock()
	defer aud.mu.Unlock()
	if len(aud.decisions) != 2 {
		t.Fatalf("decisions %+v", aud.decisions)
	}
	if d := aud.decisions[0]; d.Decision != eschost.DecisionDenied || d.Reason == eschost.ReasonAbortedByUser {
		t.Fatalf("control D decision %+v", d)
	}
	if d := aud.decisions[1]; d.Decision != eschost.DecisionDenied || d.Reason != eschost.ReasonAbortedByUser {
		t.Fatalf("Q decision %+v, want denied: %s", d, eschost.ReasonAbortedByUser)
	}
}
