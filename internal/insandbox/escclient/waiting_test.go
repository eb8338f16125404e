package escclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

// waitingRig is a coordinator reached through a relay that holds the
// connection: each accepted connection runs before (nil: nothing), then
// waits hold before the TLS handshake with the Trust Anchor the test
// names, and answers exit 0 with the request it read.
type waitingRig struct {
	sock, tlsDir string
	getenv       func(string) string
	got          chan *escwire.Request
}

func newWaitingRig(t *testing.T) *waitingRig {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	a, _ := session.New()
	del, err := a.Delegate("0123456789ab", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := &waitingRig{sock: sock, got: make(chan *escwire.Request, 4)}
	env := map[string]string{EnvSocket: sock}
	for _, kv := range del.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	r.getenv = func(k string) string { return env[k] }
	r.tlsDir = filepath.Join(t.TempDir(), "tls")
	env[EnvTLSDir] = r.tlsDir
	return r
}

// serve accepts the client's connections, the n-th with server(n).
func (r *waitingRig) serve(t *testing.T, hold time.Duration, server func(n int) (*tls.Config, func())) {
	t.Helper()
	ln, err := net.Listen("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for n := 0; ; n++ {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			cfg, before := server(n)
			go func() {
				defer raw.Close()
				if before != nil {
					before()
				}
				time.Sleep(hold)
				tc := tls.Server(raw, cfg)
				if tc.Handshake() != nil {
					return
				}
				line, err := bufio.NewReader(tc).ReadBytes('\n')
				if err != nil {
					return
				}
				req, err := escwire.Decode(line)
				if err != nil {
					return
				}
				r.got <- req
				_ = json.NewEncoder(tc).Encode(escwire.Frame{Type: escwire.FrameExit, Code: 0})
			}()
		}
	}()
}

func startAnchor(t *testing.T, dir string) *trust.Anchor {
	t.Helper()
	ta, err := trust.Start(trust.Options{Dir: dir, Profile: "p", SandboxID: "0123456789ab"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ta.Close() })
	return ta
}

// A request that waits before its handshake (a cluster session's relay
// holding it while no coordinator is linked) is signed when the
// coordinator answers, so its timestamp is within the replay window
// however long it waited. Control: the handshake really waited.
func TestRequestSignedAfterTheWait(t *testing.T) {
	const hold = 400 * time.Millisecond
	r := newWaitingRig(t)
	ta := startAnchor(t, r.tlsDir)
	r.serve(t, hold, func(int) (*tls.Config, func()) { return ta.ServerConfig(), nil })
	began := time.Now()
	code, err := run(context.Background(), r.getenv, request{argv: []string{"true"}}, io.Discard, io.Discard)
	if err != nil || code != 0 {
		t.Fatalf("run = %d, %v", code, err)
	}
	req := <-r.got
	if waited := time.Since(began); waited < hold {
		t.Fatalf("control: the request took %v, not held %v", waited, hold)
	}
	if stamped := time.UnixMilli(req.Timestamp); stamped.Before(began.Add(hold)) {
		t.Fatalf("the request was stamped %v after the call, before the %v wait ended", stamped.Sub(began), hold)
	}
	if !req.VerifySignature() {
		t.Fatal("the request's signature does not verify")
	}
}

// A request that waited while its cluster session's coordinator started
// again (a new Trust Anchor, whose bundle the relay wrote meanwhile) is
// sent again, once, with the new bundle. Control: a coordinator whose
// CA the directory never gets is refused, with no loop.
func TestRequestRetriedWithANewAnchor(t *testing.T) {
	r := newWaitingRig(t)
	old := startAnchor(t, r.tlsDir)
	freshDir := filepath.Join(t.TempDir(), "fresh")
	fresh := startAnchor(t, freshDir)
	install := func() {
		b, err := os.ReadFile(filepath.Join(freshDir, trust.BundleFile))
		if err == nil {
			err = os.WriteFile(filepath.Join(old.Dir(), trust.BundleFile), b, 0o600)
		}
		if err != nil {
			t.Error(err)
		}
	}
	var tries atomic.Int32
	r.serve(t, 50*time.Millisecond, func(n int) (*tls.Config, func()) {
		tries.Add(1)
		if n == 0 {
			return fresh.ServerConfig(), install // the relay wrote the new bundle while it held the request
		}
		return fresh.ServerConfig(), nil
	})
	code, err := run(context.Background(), r.getenv, request{argv: []string{"true"}}, io.Discard, io.Discard)
	if err != nil || code != 0 || tries.Load() != 2 {
		t.Fatalf("run = %d, %v after %d connections, want 0 after 2", code, err, tries.Load())
	}

	// Control: the directory keeps a CA the coordinator does not have.
	stranger := startAnchor(t, filepath.Join(t.TempDir(), "stranger"))
	tries.Store(0)
	r2 := newWaitingRig(t)
	startAnchor(t, r2.tlsDir)
	r2.serve(t, 0, func(int) (*tls.Config, func()) { tries.Add(1); return stranger.ServerConfig(), nil })
	if _, err := run(context.Background(), r2.getenv, request{argv: []string{"true"}}, io.Discard, io.Discard); err == nil || tries.Load() != 1 {
		t.Fatalf("a coordinator of another CA: err %v after %d connections, want an error after 1", err, tries.Load())
	}
}
