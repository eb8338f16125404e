package ctlserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

func startServer(t *testing.T, uid int) (*Server, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "c.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(uid, nil)
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, path
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// readMessage reads one message as a raw client.
func readMessage(nc net.Conn) (*ctl.Message, error) {
	line, err := bufio.NewReader(nc).ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	return ctl.DecodeMessage(line)
}

const sid = "0123456789abcdef0123456789abcdef"

func TestSocketMode(t *testing.T) {
	_, path := startServer(t, os.Getuid())
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
}

func TestRequestReplyBothWays(t *testing.T) {
	s, path := startServer(t, os.Getuid())
	attached := make(chan *Session, 1)
	detached := make(chan *Session, 1)
	s.Attached = func(x *Session) error { attached <- x; return nil }
	s.Detached = func(x *Session) { detached <- x }
	s.Handle(ctl.TypeExecSpec, func(_ context.Context, r *Request) (any, error) {
		var req ctl.ExecSpecRequest
		if err := r.Decode(&req); err != nil {
			return nil, err
		}
		if r.Session == nil {
			return nil, errors.New("no session")
		}
		return ctl.ExecSpec{Container: req.SessionID, Env: map[string]string{"session": r.Session.ID}}, nil
	})
	c := ctl.NewClient(nil)
	c.Handle("prompt", func(_ context.Context, r *ctl.Request) (any, error) {
		var q string
		_ = r.Decode(&q)
		return "answer to " + q, nil
	})
	if err := c.Connect(ctx(t), path, ctl.Hello{Session: &ctl.SessionInfo{ID: sid, PID: 42, Profile: "default"}}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess := <-attached
	if sess.PeerPID != os.Getpid() || sess.PID != 42 {
		t.Errorf("peer pid %d, claimed %d", sess.PeerPID, sess.PID)
	}
	out, err := c.ExecSpec(ctx(t), ctl.ExecSpecRequest{SessionID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Container != "b" || out.Env["session"] != sid {
		t.Fatalf("exec spec: %+v", out)
	}
	// Server push to one session, addressed by id.
	var ans string
	if err := s.Session(sid).Call(ctx(t), "prompt", "q1", &ans); err != nil || ans != "answer to q1" {
		t.Fatalf("push: %q %v", ans, err)
	}
	// Unknown types are typed errors.
	err = c.GitSync(ctx(t))
	if !errors.Is(err, ctl.ErrUnknownType) {
		t.Fatalf("unknown type: %v", err)
	}
	c.Close()
	select {
	case d := <-detached:
		if d.ID != sid {
			t.Fatal(d.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no detach after close")
	}
	if s.Session(sid) != nil {
		t.Fatal("session still registered")
	}
}

func TestNotifyAndBroadcast(t *testing.T) {
	s, path := startServer(t, os.Getuid())
	got := make(chan string, 2)
	for i := 0; i < 2; i++ {
		c := ctl.NewClient(nil)
		c.Handle(ctl.TypeShutdown, func(_ context.Context, r *ctl.Request) (any, error) {
			var sd ctl.Shutdown
			_ = r.Decode(&sd)
			got <- sd.Reason
			return nil, nil
		})
		id := strings.Repeat(string("ab"[i]), 32)
		if err := c.Connect(ctx(t), path, ctl.Hello{Session: &ctl.SessionInfo{ID: id}}); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	s.Broadcast(ctl.TypeShutdown, ctl.Shutdown{Reason: "stop"})
	for i := 0; i < 2; i++ {
		select {
		case r := <-got:
			if r != "stop" {
				t.Fatal(r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("broadcast not received")
		}
	}
}

func TestAPIMismatch(t *testing.T) {
	_, path := startServer(t, os.Getuid())
	// A raw client speaking another version.
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := json.Marshal(ctl.Message{Type: ctl.TypeHello, ID: 1, Payload: json.RawMessage(`{"api":999}`)})
	nc.Write(append(b, '\n'))
	m, err := readMessage(nc)
	if err != nil {
		t.Fatal(err)
	}
	if m.Error == nil || m.Error.Code != ctl.ErrAPIMismatch.Code {
		t.Fatalf("reply %+v", m)
	}
	if !strings.Contains(m.Error.Message, "coordinator speaks API 1, this lazaret speaks 999") {
		t.Fatalf("message %q", m.Error.Message)
	}
}

func TestHelloRequiredFirst(t *testing.T) {
	s, path := startServer(t, os.Getuid())
	var called atomic.Bool
	s.Handle(ctl.TypeStatus, func(context.Context, *Request) (any, error) { called.Store(true); return nil, nil })
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := json.Marshal(ctl.Message{Type: ctl.TypeStatus, ID: 1})
	nc.Write(append(b, '\n'))
	m, err := readMessage(nc)
	if err != nil {
		t.Fatal(err)
	}
	if m.Error == nil || m.Error.Code != ctl.ErrHelloRequired.Code || called.Load() {
		t.Fatalf("reply %+v called=%v", m, called.Load())
	}
}

// TestPeerCredRefusesOtherUID checks the SO_PEERCRED gate: a server that
// expects another uid closes the connection without answering, while the
// same client against a server expecting our uid (the positive control)
// completes the hello.
func TestPeerCredRefusesOtherUID(t *testing.T) {
	_, okPath := startServer(t, os.Getuid())
	if err := ctl.NewClient(nil).Connect(ctx(t), okPath, ctl.Hello{}); err != nil {
		t.Fatalf("positive control: %v", err)
	}
	_, path := startServer(t, os.Getuid()+1)
	err := ctl.NewClient(nil).Connect(ctx(t), path, ctl.Hello{})
	if err == nil || !errors.Is(err, ctl.ErrClosed) {
		t.Fatalf("other uid accepted: %v", err)
	}
}

func TestHelloHookError(t *testing.T) {
	s, path := startServer(t, os.Getuid())
	s.Hello = func(context.Context, *ctl.Hello) (*ctl.HelloReply, error) {
		return nil, ctl.Errorf("no_such_image", "image x is not present")
	}
	err := ctl.NewClient(nil).Connect(ctx(t), path, ctl.Hello{Session: &ctl.SessionInfo{ID: sid}})
	var we *ctl.Error
	if !errors.As(err, &we) || we.Code != "no_such_image" || we.Message != "image x is not present" {
		t.Fatalf("err = %v", err)
	}
	if len(s.Sessions()) != 0 {
		t.Fatal("rejected session registered")
	}
}

func TestBadSessionIDAndDuplicate(t *testing.T) {
	_, path := startServer(t, os.Getuid())
	if err := ctl.NewClient(nil).Connect(ctx(t), path, ctl.Hello{Session: &ctl.SessionInfo{ID: "../x"}}); !errors.Is(err, ctl.ErrBadRequest) {
		t.Fatalf("bad id: %v", err)
	}
	c := ctl.NewClient(nil)
	if err := c.Connect(ctx(t), path, ctl.Hello{Session: &ctl.SessionInfo{ID: sid}}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := ctl.NewClient(nil).Connect(ctx(t), path, ctl.Hello{Session: &ctl.SessionInfo{ID: sid}}); !errors.Is(err, ctl.ErrBadRequest) {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestServerCloseEndsClients(t *testing.T) {
	s, path := startServer(t, os.Getuid())
	detached := make(chan struct{}, 1)
	s.Detached = func(*Session) { detached <- struct{}{} }
	c := ctl.NewClient(nil)
	if err := c.Connect(ctx(t), path, ctl.Hello{Session: &ctl.SessionInfo{ID: sid}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("client not closed")
	}
	select {
	case <-detached:
	case <-time.After(5 * time.Second):
		t.Fatal("no detach")
	}
}
