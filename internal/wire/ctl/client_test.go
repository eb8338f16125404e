package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"sync"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// fake is a coordinator built from the wire's own server half (NewConn,
// ReadHello, DecodeHello, ReplyHello, Serve): it records every request's
// type and payload and answers from answer (nil: no handler).
type fake struct {
	path   string
	answer func(typ string, payload json.RawMessage) (any, error)

	mu  sync.Mutex
	got []sent
}

type sent struct {
	Type    string
	Payload string
}

func startFake(t *testing.T, answer func(string, json.RawMessage) (any, error)) *fake {
	t.Helper()
	ln, path := listen(t)
	f := &fake{path: path, answer: answer}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(nc)
		}
	}()
	return f
}

func (f *fake) serve(nc net.Conn) {
	c := NewConn(nc, nil)
	m, err := c.ReadHello()
	if err != nil {
		return
	}
	_, herr := DecodeHello(m)
	if c.ReplyHello(m, &HelloReply{Domain: "d"}, herr) != nil {
		c.Close()
		return
	}
	c.Serve(func(_ context.Context, req *Request) (any, error) {
		f.mu.Lock()
		f.got = append(f.got, sent{req.Type, string(req.Payload)})
		f.mu.Unlock()
		if f.answer == nil {
			return nil, UnknownType(req.Type)
		}
		return f.answer(req.Type, req.Payload)
	})
}

func (f *fake) requests() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.got...)
}

func connect(t *testing.T, f *fake) *Client {
	t.Helper()
	c := NewClient(nil)
	if err := c.Connect(ctx(t), f.path, Hello{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if c.Reply.Domain != "d" {
		t.Fatalf("hello reply %+v", c.Reply)
	}
	return c
}

// TestClientTypedRequests pins what each typed method puts on the wire
// (the type and payload the coordinator's handlers read) and that it
// decodes the reply.
func TestClientTypedRequests(t *testing.T) {
	replies := map[string]any{
		TypeStatus:             Status{Domain: "d", PID: 7, Sessions: []SessionStatus{{SessionInfo: SessionInfo{ID: "s"}}}},
		TypeExecSpec:           ExecSpec{Container: "c", ContainerID: "id", Env: map[string]string{"A": "b"}, Workdir: "/w"},
		TypeGitSync:            nil,
		TypeStop:               nil,
		escprompt.TypeRegister: escprompt.RegisterReply{SandboxID: "sb"},
		TypeAuditPolicyChange:  uint64(5),
		TypeAuditVerify:        audit.Report{Entries: 3},
	}
	f := startFake(t, func(typ string, _ json.RawMessage) (any, error) { return replies[typ], nil })
	c := connect(t, f)
	x := ctx(t)

	st, err := c.Status(x)
	if err != nil || !reflect.DeepEqual(st, replies[TypeStatus]) {
		t.Fatalf("status: %+v %v", st, err)
	}
	spec, err := c.ExecSpec(x, ExecSpecRequest{SessionID: "s1", TTY: true})
	if err != nil || !reflect.DeepEqual(spec, replies[TypeExecSpec]) {
		t.Fatalf("exec spec: %+v %v", spec, err)
	}
	if err := c.GitSync(x); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(x, StopRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(x, StopRequest{Cause: StopCauseEscalationAbort}); err != nil {
		t.Fatal(err)
	}
	reg, err := c.RegisterEscalation(x, escprompt.RegisterRequest{PublicKey: []byte{1, 2}})
	if err != nil || reg.SandboxID != "sb" {
		t.Fatalf("register: %+v %v", reg, err)
	}
	seq, err := c.RecordPolicyChange(x, PolicyChange{Action: "net allow"})
	if err != nil || seq != 5 {
		t.Fatalf("policy change: %d %v", seq, err)
	}
	r, err := c.VerifyAudit(x)
	if err != nil || r.Entries != 3 {
		t.Fatalf("verify: %+v %v", r, err)
	}

	want := []sent{
		{TypeStatus, ""},
		{TypeExecSpec, `{"session_id":"s1","tty":true}`},
		{TypeGitSync, ""},
		// A `lazaret stop` carries no payload, as it always did.
		{TypeStop, ""},
		{TypeStop, `{"cause":"escalation_abort"}`},
		{escprompt.TypeRegister, `{"public_key":"AQI="}`},
		{TypeAuditPolicyChange, `{"action":"net allow"}`},
		{TypeAuditVerify, ""},
	}
	if got := f.requests(); !reflect.DeepEqual(got, want) {
		t.Fatalf("on the wire:\n got %q\nwant %q", got, want)
	}
}

// TestClientErrors: wire errors keep their code through every typed
// method, and a client that is not (or no longer) connected fails with
// ErrClosed.
func TestClientErrors(t *testing.T) {
	c := NewClient(nil)
	if _, err := c.Status(ctx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("before connect: %v", err)
	}
	c = connect(t, startFake(t, nil))
	x := ctx(t)
	if err := c.GitSync(x); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("git sync: %v", err)
	}
	if _, err := c.RegisterEscalation(x, escprompt.RegisterRequest{}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("register: %v", err)
	}
	if _, err := c.VerifyAudit(x); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("verify: %v", err)
	}
	c.Close()
	if err := c.Stop(x, StopRequest{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	<-c.Done()
}

// TestClientQueryAuditPages: the client follows pages, asking for what
// follows the last entry received with the rest of a "last N".
func TestClientQueryAuditPages(t *testing.T) {
	page := func(seqs ...uint64) AuditPageJSON {
		p := AuditPageJSON{More: true}
		for _, s := range seqs {
			b, _ := json.Marshal(audit.Entry{Seq: s, Kind: audit.KindPolicyChange})
			p.Entries = append(p.Entries, b)
		}
		return p
	}
	var n int
	f := startFake(t, func(typ string, _ json.RawMessage) (any, error) {
		n++
		if n == 1 {
			return page(8, 9), nil
		}
		p := page(10)
		p.More = false
		return p, nil
	})
	c := connect(t, f)
	var seqs []uint64
	err := c.QueryAudit(ctx(t), audit.Filter{Last: 3}, func(es []audit.Entry) error {
		for _, e := range es {
			seqs = append(seqs, e.Seq)
		}
		return nil
	})
	if err != nil || !reflect.DeepEqual(seqs, []uint64{8, 9, 10}) {
		t.Fatalf("entries %v %v", seqs, err)
	}
	want := []sent{{TypeAuditQuery, `{"last":3}`}, {TypeAuditQuery, `{"after_seq":9,"limit":1}`}}
	if got := f.requests(); !reflect.DeepEqual(got, want) {
		t.Fatalf("on the wire:\n got %q\nwant %q", got, want)
	}
}
