package clicore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// fakeCoordinator answers status and the approvals requests on a control
// socket in a private runtime directory, as a coordinator with one
// pending request whose agent text is hostile.
type fakeCoordinator struct {
	mu       sync.Mutex
	answered []ctl.ApprovalAnswer
	refuse   *ctl.Error
}

const fakeID, fakeHash = "0a1b2c3d", "feedface"

var hostileSummary = `"touch" "x` + "\x1b[2J\u202e" + `"`

func (f *fakeCoordinator) handle(_ context.Context, r *ctl.Request) (any, error) {
	pending := ctl.PendingRequest{ID: fakeID, Kind: ctl.RequestEscalation, Created: time.Now().Add(-time.Minute),
		Session: "0123456789abcdef0123456789abcdef", SessionCommand: []string{"shell"},
		Detail: "executable /usr/bin/touch\nargv[0]    \"touch\"\n", Summary: hostileSummary, Hash: fakeHash, AnswerFrom: "any"}
	switch r.Type {
	case ctl.TypeStatus:
		return &ctl.Status{Profile: "dev", Workspace: "/home/u/proj"}, nil
	case ctl.TypeApprovalsList:
		return &ctl.ApprovalsList{Profile: "dev", Workspace: "/home/u/proj", Pending: []ctl.PendingRequest{pending}}, nil
	case ctl.TypeApprovalsShow:
		var s ctl.ApprovalsShow
		_ = r.Decode(&s)
		if s.ID != fakeID {
			return nil, ctl.Errorf(ctl.ErrUnknownRequest.Code, "no pending request %q", s.ID)
		}
		return &pending, nil
	case ctl.TypeApprovalsAnswer:
		var a ctl.ApprovalAnswer
		_ = r.Decode(&a)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.refuse != nil {
			return nil, f.refuse
		}
		f.answered = append(f.answered, a)
		return &ctl.ApprovalAnswered{Decision: a.Action}, nil
	}
	return nil, ctl.UnknownType(r.Type)
}

func startFakeCoordinator(t *testing.T) *fakeCoordinator {
	t.Helper()
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	rt, err := domain.RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	path := (&domain.Anchor{RuntimeDir: rt, Hash: "0123456789abcdef"}).ControlSocket()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fakeCoordinator{}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c := ctl.NewConn(nc, nil)
				m, err := c.ReadHello()
				if err != nil || c.ReplyHello(m, &ctl.HelloReply{Profile: "dev"}, nil) != nil {
					return
				}
				c.Serve(f.handle)
			}()
		}
	}()
	return f
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	g := &Approvals{IO: IO{In: strings.NewReader(""), Out: &out, ErrOut: &out}, Log: func() *slog.Logger { return slog.New(slog.DiscardHandler) }, Invocation: "lazaret"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	switch args[0] {
	case "ls":
		err = runApprovalsList(ctx, g, &approvalsOptions{json: len(args) > 1}, "")
	case "show":
		err = runApprovalsShow(ctx, g, &approvalsOptions{}, args[1])
	case "answer":
		o := &approvalsOptions{}
		if len(args) > 3 {
			o.hash = args[3]
		}
		err = runApprovalsAnswer(ctx, g, o, args[1], args[2])
	}
	return out.String(), err
}

func TestApprovalsListIsSafe(t *testing.T) {
	startFakeCoordinator(t)
	out, err := runCLI(t, "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fakeID, "0123456789ab (shell)", "dev", "proj", "escalation", `<U+202E>`} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\u202e") {
		t.Fatalf("raw agent text in the list: %q", out)
	}
	js, err := runCLI(t, "ls", "--json")
	if err != nil || !strings.Contains(js, `"hash": "feedface"`) || !strings.Contains(js, `"workspace": "/home/u/proj"`) {
		t.Fatalf("json: %v\n%s", err, js)
	}
}

func TestApprovalsShowAndUnknown(t *testing.T) {
	startFakeCoordinator(t)
	out, err := runCLI(t, "show", fakeID)
	if err != nil || !strings.Contains(out, "hash      "+fakeHash) || !strings.Contains(out, `argv[0]    "touch"`) {
		t.Fatalf("show: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "show", "ffffffff"); err == nil || !strings.Contains(err.Error(), `no pending request "ffffffff"`) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestApprovalsAnswer(t *testing.T) {
	f := startFakeCoordinator(t)
	// Without a terminal an approval needs the hash; nothing is sent.
	if _, err := runCLI(t, "answer", fakeID, "approve"); err == nil || !strings.Contains(err.Error(), "--hash") {
		t.Fatalf("approve without --hash: %v", err)
	}
	if _, err := runCLI(t, "answer", fakeID, "maybe"); err == nil || !strings.Contains(err.Error(), "want approve or deny") {
		t.Fatalf("bad action: %v", err)
	}
	if len(f.answered) != 0 {
		t.Fatalf("sent %v", f.answered)
	}
	out, err := runCLI(t, "answer", fakeID, "approve", fakeHash)
	if err != nil || !strings.Contains(out, "request "+fakeID+": approve") {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	// A denial needs no confirmation.
	if _, err := runCLI(t, "answer", fakeID, "deny"); err != nil {
		t.Fatal(err)
	}
	if len(f.answered) != 2 || f.answered[0].Hash != fakeHash || f.answered[1].Action != ctl.ActionDeny {
		t.Fatalf("answers %+v", f.answered)
	}
}

func TestApprovalsRefusalsHaveHints(t *testing.T) {
	f := startFakeCoordinator(t)
	for _, c := range []struct {
		refuse *ctl.Error
		hint   string
	}{
		{ctl.Errorf(ctl.ErrStaleRequest.Code, "the request changed"), "approvals show ID"},
		{ctl.Errorf(ctl.ErrAnsweredFirst.Code, "answered on the terminal first"), "answered before yours"},
		{ctl.Errorf(ctl.ErrAnswerNotAllowed.Code, "only on its terminal"), `answer_from = "any"`},
	} {
		f.mu.Lock()
		f.refuse = c.refuse
		f.mu.Unlock()
		_, err := runCLI(t, "answer", fakeID, "deny")
		code, hint := exitCodeAndHint(err)
		if err == nil || code == 0 || !strings.Contains(hint, c.hint) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, code %d, hint %q", c.refuse.Code, err, code, hint)
		}
	}
}

// exitCodeAndHint reads a withHint error.
func exitCodeAndHint(err error) (int, string) {
	var h *HintError
	if errors.As(err, &h) {
		return h.Code, h.Hint
	}
	return 0, ""
}

func TestEventLineEscapes(t *testing.T) {
	line := EventLine(ctl.Event{Seq: 7, Kind: ctl.EventApprovalDecided, Session: "0123456789abcdef0123", Request: fakeID,
		Decision: "approve", From: "lazaret approvals (pid 1, uid 2)", Detail: "x\n\x1b[2Jy"})
	if strings.ContainsAny(line, "\n\x1b") || !strings.Contains(line, "#7 approval.decided session=0123456789ab request="+fakeID+" decision=approve") {
		t.Fatalf("line %q", line)
	}
}

// TestApprovalsAnswerOnTerminal: on a terminal an approval shows the
// request and asks y/N through the readability gate; a "y" typed at once
// is dropped (nothing is answered), one typed once the question was
// readable approves, bound to the hash shown.
func TestApprovalsAnswerOnTerminal(t *testing.T) {
	f := startFakeCoordinator(t)
	for _, early := range []bool{true, false} {
		p := ptytest.Open(t)
		g := &Approvals{IO: IO{In: p.TTY, Out: p.TTY, ErrOut: p.TTY}, Log: func() *slog.Logger { return slog.New(slog.DiscardHandler) }, Invocation: "lazaret"}
		done := make(chan error, 1)
		go func() { done <- runApprovalsAnswer(context.Background(), g, &approvalsOptions{}, fakeID, "approve") }()
		p.WaitFor(t, "Approve request "+fakeID+"? [y/N]")
		if !early {
			time.Sleep(prompt.MinReadable + 300*time.Millisecond)
		}
		p.Ptmx.Write([]byte("y\r"))
		if early {
			time.Sleep(prompt.MinReadable + 300*time.Millisecond)
			p.Ptmx.Write([]byte("\r"))
		}
		err := <-done
		f.mu.Lock()
		n := len(f.answered)
		f.mu.Unlock()
		if early && (err == nil || n != 0) {
			t.Fatalf("an early y answered: %v, %d answers", err, n)
		}
		if !early && (err != nil || n != 1 || f.answered[0].Hash != fakeHash) {
			t.Fatalf("a readable y: %v, answers %+v", err, f.answered)
		}
		if !p.Shows("hash      " + fakeHash) {
			t.Fatalf("the request was not shown:\n%s", p.Output())
		}
	}
}
