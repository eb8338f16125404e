package kubecli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// hubEnv opens a session hub as a cluster session does, with cfg.
func hubEnv(t *testing.T, cfg string, uid int) (*sessionHub, *sessionIO) {
	h, s, _ := hubEnvIn(t, cfg, uid)
	return h, s
}

func hubEnvIn(t *testing.T, cfg string, uid int) (*sessionHub, *sessionIO, *env) {
	t.Helper()
	e := newEnv(t, cfg)
	// A short runtime directory: a socket's path has 107 bytes at most.
	short, err := os.MkdirTemp("", "lzk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	t.Setenv("XDG_RUNTIME_DIR", short)
	g := newGlobals(IO{})
	g.configPath, g.workspace, g.log, g.uid = e.cfgFile, e.ws, discardLog(), uid
	c, err := g.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	tg, err := g.resolve(c, "")
	if err != nil {
		t.Fatal(err)
	}
	s := &sessionIO{id: newSessionID()}
	h, err := g.openSessionHub(c, tg, s.id, []string{"shell"}, false)
	if err != nil {
		t.Fatal(err)
	}
	h.setPod("pod-a")
	s.hub = h
	t.Cleanup(h.close)
	return h, s, e
}

func dialHub(t *testing.T, h *sessionHub) (*ctl.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := ctl.NewClient(discardLog())
	if err := c.Connect(ctx, h.sock, ctl.Hello{}); err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// TestSessionHubAnsweredFromAnotherProcess: a cluster session's
// escalation prompt (no terminal, answer_from = "any") is a pending
// request on the session's control socket, in its status and its event
// stream; `approvals answer` through the socket, bound to the hash,
// approves it (a stale hash refused first); the socket goes with the
// session and session.ended closes the stream.
func TestSessionHubAnsweredFromAnotherProcess(t *testing.T) {
	h, s := hubEnv(t, "[escalation]\nanswer_from = \"any\"\n[cluster]\nnamespace = \"agents\"\n", os.Getuid())
	if fi, err := os.Stat(h.sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket %v %v", fi, err)
	}
	rt, _ := domain.RuntimeDir()
	if filepath.Dir(h.sock) != domain.KubeSessionDir(rt) {
		t.Fatalf("socket %s is not in the table's directory", h.sock)
	}
	c, err := dialHub(t, h)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan ctl.Event, 16)
	if err := c.SubscribeEvents(context.Background(), 0, func(e ctl.Event) { seen <- e }); err != nil {
		t.Fatal(err)
	}
	if e := <-seen; e.Kind != ctl.EventSessionStarted || e.Session != s.id {
		t.Fatalf("first event %+v", e)
	}
	res := make(chan escprompt.Answer, 1)
	go func() {
		a, _ := s.prompter().Prompt(context.Background(), escprompt.PromptRequest{RequestID: "r1", RequestHash: "h1", Executable: "/usr/bin/touch", Argv: []string{"touch", "f"}})
		res <- a
	}()
	e := <-seen
	if e.Kind != ctl.EventApprovalPending || e.Request == "" {
		t.Fatalf("event %+v", e)
	}
	st, err := c.Status(context.Background())
	if err != nil || len(st.Sessions) != 1 || st.Sessions[0].ID != s.id || len(st.Sessions[0].Pending) != 1 || st.Container.Name != "pod/pod-a" {
		t.Fatalf("status %+v %v", st, err)
	}
	if _, err := c.ApprovalAnswer(context.Background(), ctl.ApprovalAnswer{ID: e.Request, Hash: "stale", Action: ctl.ActionApprove}); !errors.Is(err, ctl.ErrStaleRequest) {
		t.Fatalf("a stale hash: %v", err)
	}
	if _, err := c.ApprovalAnswer(context.Background(), ctl.ApprovalAnswer{ID: e.Request, Hash: "h1", Action: ctl.ActionApprove}); err != nil {
		t.Fatal(err)
	}
	if a := <-res; a.Action != escprompt.Approve || a.AnsweredFrom == "" {
		t.Fatalf("answer %+v", a)
	}
	s.keptState(clicore.KeptState{})
	s.keptState(clicore.KeptState{Attached: true})
	h.close()
	var kinds []string
	for e := range seen {
		kinds = append(kinds, e.Kind)
		if e.Kind == ctl.EventSessionEnded {
			break
		}
	}
	want := []string{ctl.EventApprovalDecided, ctl.EventSessionDetached, ctl.EventSessionAttached, ctl.EventSessionEnded}
	if len(kinds) != len(want) {
		t.Fatalf("events %q, want %q", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events %q, want %q", kinds, want)
		}
	}
	if _, err := os.Stat(h.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the control socket outlived its session: %v", err)
	}
}

// TestSessionHubOnlyItsUser: the control socket admits only its user
// (SO_PEERCRED): a hub expecting another uid closes the connection
// unanswered; the same client against one expecting ours (the positive
// control) completes the hello.
func TestSessionHubOnlyItsUser(t *testing.T) {
	ok, s := hubEnv(t, plainCfg, os.Getuid())
	// answer_from = "session" (the default) without a terminal: no
	// prompter, every request denied at once as before the hub.
	if s.prompter() != nil {
		t.Error("a session without a terminal got a prompter under answer_from = session")
	}
	if _, err := dialHub(t, ok); err != nil {
		t.Fatalf("positive control: %v", err)
	}
	other, _ := hubEnv(t, plainCfg, os.Getuid()+1)
	if _, err := dialHub(t, other); err == nil || !errors.Is(err, ctl.ErrClosed) {
		t.Fatalf("another user was answered: %v", err)
	}
}

// TestApprovalsVerbAnswersAClusterSession: `lazaret --backend kubernetes
// approvals` lists a cluster session's pending request (escaped) and
// `approvals answer ID approve --hash H` decides it; without --hash and
// a terminal it is a usage error naming the flag, nothing answered.
func TestApprovalsVerbAnswersAClusterSession(t *testing.T) {
	h, s, e := hubEnvIn(t, "[escalation]\nanswer_from = \"any\"\n[cluster]\nnamespace = \"agents\"\n", os.Getuid())
	pending, stop := h.events.Subscribe(0)
	defer stop()
	res := make(chan escprompt.Answer, 1)
	go func() {
		a, _ := s.prompter().Prompt(context.Background(), escprompt.PromptRequest{RequestID: "r1", RequestHash: "h1",
			Executable: "/usr/bin/touch", Argv: []string{"touch", "x\x1b[2J"}})
		res <- a
	}()
	var id string
	for ev := range pending {
		if ev.Kind == ctl.EventApprovalPending {
			id = ev.Request
			break
		}
	}
	if code := e.run("approvals"); code != 0 || !strings.Contains(e.out.String(), id) || strings.Contains(e.out.String(), "\x1b") {
		t.Fatalf("approvals: %d %q %s", code, e.out.String(), e.errOut.String())
	}
	if code := e.run("approvals", "answer", id, "approve"); code != 2 || !strings.Contains(e.errOut.String(), "--hash") {
		t.Fatalf("answer without --hash: %d %s", code, e.errOut.String())
	}
	if len(h.approvals.List()) != 1 {
		t.Fatal("a refused answer decided the request")
	}
	if code := e.run("approvals", "answer", id, "approve", "--hash", "h1"); code != 0 {
		t.Fatalf("answer: %d %s", code, e.errOut.String())
	}
	if a := <-res; a.Action != escprompt.Approve {
		t.Fatalf("answer %+v", a)
	}
}

// TestEventsVerbFollowsClusterSessions: `lazaret --backend kubernetes
// events --json` streams this workspace's cluster session (escaped JSON
// lines) and exits 0 once it sent session.ended; with no session running
// it is one line and a hint, exit 1.
func TestEventsVerbFollowsClusterSessions(t *testing.T) {
	h, s, e := hubEnvIn(t, "[cluster]\nnamespace = \"agents\"\n", os.Getuid())
	h.events.Publish(ctl.Event{Kind: ctl.EventAgentAttention, Session: s.id, Detail: "bell\x1b[2J"})
	done := make(chan int, 1)
	go func() { done <- e.run("events", "--json") }()
	// The subscription is in place once the hub has a subscriber beyond
	// none: close ends the stream either way, after session.ended.
	for h.events.Subscribers() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	h.close()
	if code := <-done; code != 0 {
		t.Fatalf("events: exit %d %s", code, e.errOut.String())
	}
	out := e.out.String()
	for _, want := range []string{`"kind":"session.started"`, `"kind":"agent.attention"`, `"kind":"session.ended"`} {
		if !strings.Contains(out, want) {
			t.Errorf("events lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape reached the output: %q", out)
	}
	if code := e.run("events"); code != 1 || !strings.Contains(e.errOut.String(), "no cluster session of profile default") {
		t.Fatalf("events without a session: %d %s", code, e.errOut.String())
	}
}
