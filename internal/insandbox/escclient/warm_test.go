package escclient

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

// A request after another finds a connection already handshaken; an old
// one or one made with another TLS configuration is never used.
func TestWarmPoolSkipsTheHandshake(t *testing.T) {
	ta, err := trust.Start(trust.Options{Dir: filepath.Join(t.TempDir(), "tls"), Profile: "p", SandboxID: "0123456789ab"})
	if err != nil {
		t.Fatal(err)
	}
	defer ta.Close()
	ln, sock := listen(t)
	var handshakes atomic.Int32
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer raw.Close()
				tc := tls.Server(raw, ta.ServerConfig())
				if tc.Handshake() != nil {
					return
				}
				handshakes.Add(1)
				if _, err := bufio.NewReader(tc).ReadBytes('\n'); err != nil {
					return
				}
				_ = json.NewEncoder(tc).Encode(escwire.Frame{Type: escwire.FrameExit, Code: 7})
			}()
		}
	}()
	cfg, _, err := trust.ClientConfig(ta.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var p warmPool
	ctx := withWarm(context.Background(), &p)
	exchange := func(cfg *tls.Config) {
		t.Helper()
		if code, err := Exchange(ctx, sock, cfg, []byte("{}\n"), io.Discard, io.Discard); err != nil || code != 7 {
			t.Fatalf("Exchange = %d, %v", code, err)
		}
	}
	ready := func() {
		t.Helper()
		p.refill()
		for i := 0; i < 500; i++ {
			p.mu.Lock()
			ok := p.c != nil
			p.mu.Unlock()
			if ok {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("no warm connection after refill")
	}
	exchange(cfg)
	if got := handshakes.Load(); got != 1 {
		t.Fatalf("first request: %d handshakes", got)
	}
	ready()
	exchange(cfg)
	if got := handshakes.Load(); got != 2 {
		t.Errorf("second request made its own handshake: %d handshakes, want 2 (one of them the refill)", got)
	}
	// Positive controls: too old, or another configuration (a rotated
	// bundle): a new connection is made.
	ready()
	p.mu.Lock()
	p.c.made = time.Now().Add(-warmMaxAge - time.Second)
	p.mu.Unlock()
	exchange(cfg)
	if got := handshakes.Load(); got != 4 {
		t.Errorf("an old warm connection was used: %d handshakes, want 4", got)
	}
	ready()
	exchange(cfg.Clone())
	if got := handshakes.Load(); got != 6 {
		t.Errorf("a warm connection of another configuration was used: %d handshakes, want 6", got)
	}
}
