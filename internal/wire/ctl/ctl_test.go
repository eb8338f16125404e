package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/version"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, path
}

func TestClientSeesAPIMismatch(t *testing.T) {
	// A fake coordinator of another version answers the hello.
	ln, path := listen(t)
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
	err := NewClient(nil).Connect(ctx(t), path, Hello{})
	var am *APIMismatchError
	if !errors.As(err, &am) || am.Coordinator != version.APIVersion+1 || !errors.Is(err, ErrAPIMismatch) {
		t.Fatalf("err = %v", err)
	}
}

func TestOversizedMessageClosesConnection(t *testing.T) {
	f := startFake(t, nil)
	c := NewClient(nil)
	if err := c.Connect(ctx(t), f.path, Hello{}); err != nil {
		t.Fatal(err)
	}
	err := c.call(ctx(t), "x", strings.Repeat("a", MaxMessage), nil)
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
