package ctl

import (
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

	"github.com/lazaret-dev/lazaret/internal/version"
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
	s.Handle("echo", func(_ context.Context, r *Request) (any, error) {
		var v map[string]string
		if err := r.Decode(&v); err != nil {
			return nil, err
		}
		if r.Session == nil {
			return nil, errors.New("no session")
		}
		v["session"] = r.Session.ID
		return v, nil
	})
	c := NewClient(nil)
	c.Handle("prompt", func(_ context.Context, r *Request) (any, error) {
		var q string
		_ = r.Decode(&q)
		return "answer to " + q, nil
	})
	if err := c.Connect(ctx(t), path, Hello{Session: &SessionInfo{ID: sid, PID: 42, Profile: "default"}}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess := <-attached
	if sess.PeerPID != os.Getpid() || sess.PID != 42 {
		t.Errorf("peer pid %d, claimed %d", sess.PeerPID, sess.PID)
	}
	var out map[string]string
	if err := c.Call(ctx(t), "echo", map[string]string{"a": "b"}, &out); err != nil {
		t.Fatal(err)
	}
	if out["a"] != "b" || out["session"] != sid {
		t.Fatalf("echo: %v", out)
	}
	// Server push to one session, addressed by id.
	var ans string
	if err := s.Session(sid).Call(ctx(t), "prompt", "q1", &ans); err != nil || ans != "answer to q1" {
		t.Fatalf("push: %q %v", ans, err)
	}
	// Unknown types are typed errors.
	err := c.Call(ctx(t), "nope", nil, nil)
	if !errors.Is(err, ErrUnknownType) {
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
		c := NewClient(nil)
		c.Handle(TypeShutdown, func(_ context.Context, r *Request) (any, error) {
			var sd Shutdown
			_ = r.Decode(&sd)
			got <- sd.Reason
			return nil, nil
		})
		id := strings.Repeat(string("ab"[i]), 32)
		if err := c.Connect(ctx(t), path, Hello{Session: &SessionInfo{ID: id}}); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	s.Broadcast(TypeShutdown, Shutdown{Reason: "stop"})
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
	b, _ := json.Marshal(Message{Type: TypeHello, ID: 1, Payload: json.RawMessage(`{"api":999}`)})
	nc.Write(append(b, '\n'))
	m, err := newReader(nc).next()
	if err != nil {
		t.Fatal(err)
	}
	if m.Error == nil || m.Error.Code != ErrAPIMismatch.Code {
		t.Fatalf("reply %+v", m)
	}
	if !strings.Contains(m.Error.Message, "coordinator speaks API 1, this lazaret speaks 999") {
		t.Fatalf("message %q", m.Error.Message)
	}
}

func TestClientSeesAPIMismatch(t *testing.T) {
	// A fake coordinator of another version answers the hello.
	dir := t.TempDir()
	path := filepath.Join(dir, "c.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		m, _ := newReader(nc).next()
		data, _ := json.Marshal(map[string]int{"api": version.APIVersion + 1})
		b, _ := json.Marshal(Message{Type: TypeHello, ID: m.ID, Reply: true, Error: &Error{Code: ErrAPIMismatch.Code, Data: data}})
		nc.Write(append(b, '\n'))
	}()
	err = NewClient(nil).Connect(ctx(t), path, Hello{})
	var am *APIMismatchError
	if !errors.As(err, &am) || am.Coordinator != version.APIVersion+1 || !errors.Is(err, ErrAPIMismatch) {
		t.Fatalf("err = %v", err)
	}
}

func TestHelloRequiredFirst(t *testing.T) {
	s, path := startServer(t, os.Getuid())
	var called atomic.Bool
	s.Handle(TypeStatus, func(context.Context, *Request) (any, error) { called.Store(true); return nil, nil })
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := json.Marshal(Message{Type: TypeStatus, ID: 1})
	nc.Write(append(b, '\n'))
	m, err := newReader(nc).next()
	if err != nil {
		t.Fatal(err)
	}
	if m.Error == nil || m.Error.Code != ErrHelloRequired.Code || called.Load() {
		t.Fatalf("reply %+v called=%v", m, called.Load())
	}
}

// TestPeerCredRefusesOtherUID checks the SO_PEERCRED gate: a server that
// expects another uid closes the connection without answering, while the
// same client against a server expecting our uid (the positive control)
// completes the hello.
func TestPeerCredRefusesOtherUID(t *testing.T) {
	_, okPath := startServer(t, os.Getuid())
	if err := NewClient(nil).Connect(ctx(t), okPath, Hello{}); err != nil {
		t.Fatalf("positive control: %v", err)
	}
	_, path := startServer(t, os.Getuid()+1)
	err := NewClient(nil).Connect(ctx(t), path, Hello{})
	if err == nil || !errors.Is(err, ErrClosed) {
		t.Fatalf("other uid accepted: %v", err)
	}
}

func TestHelloHookError(t *testing.T) {
	s, path := startServer(t, os.Getuid())
	s.Hello = func(context.Context, *Hello) (*HelloReply, error) {
		return nil, Errorf("no_such_image", "image x is not present")
	}
	err := NewClient(nil).Connect(ctx(t), path, Hello{Session: &SessionInfo{ID: sid}})
	var we *Error
	if !errors.As(err, &we) || we.Code != "no_such_image" || we.Message != "image x is not present" {
		t.Fatalf("err = %v", err)
	}
	if len(s.Sessions()) != 0 {
		t.Fatal("rejected session registered")
	}
}

func TestBadSessionIDAndDuplicate(t *testing.T) {
	_, path := startServer(t, os.Getuid())
	if err := NewClient(nil).Connect(ctx(t), path, Hello{Session: &SessionInfo{ID: "../x"}}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("bad id: %v", err)
	}
	c := NewClient(nil)
	if err := c.Connect(ctx(t), path, Hello{Session: &SessionInfo{ID: sid}}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := NewClient(nil).Connect(ctx(t), path, Hello{Session: &SessionInfo{ID: sid}}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestServerCloseEndsClients(t *testing.T) {
	s, path := startServer(t, os.Getuid())
	detached := make(chan struct{}, 1)
	s.Detached = func(*Session) { detached <- struct{}{} }
	c := NewClient(nil)
	if err := c.Connect(ctx(t), path, Hello{Session: &SessionInfo{ID: sid}}); err != nil {
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

func TestOversizedMessageClosesConnection(t *testing.T) {
	_, path := startServer(t, os.Getuid())
	c := NewClient(nil)
	if err := c.Connect(ctx(t), path, Hello{}); err != nil {
		t.Fatal(err)
	}
	err := c.Call(ctx(t), "x", strings.Repeat("a", MaxMessage), nil)
	if err == nil {
		t.Fatal("oversized message sent")
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"type":"hello","id":1,"payload":{"api":1}}`))
	f.Add([]byte(`{"type":"x","id":3,"reply":true,"error":{"code":"internal","message":"m"}}`))
	f.Add([]byte(`{"type":"","id":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		if m.Type == "" || (m.Reply && m.ID == 0) {
			t.Fatalf("invalid message accepted: %+v", m)
		}
		if _, err := encode(m); err != nil && len(b) < MaxMessage/2 {
			t.Fatalf("re-encode: %v", err)
		}
	})
}
