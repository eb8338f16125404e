package escclient

import (
	"context"
	"crypto/tls"
	"sync"
	"time"
)

// warmPool keeps one connection to the coordinator handshaken ahead of the
// broker's next request: a request that finds it skips the mutual TLS
// handshake (about 3 ms of a round trip near 20 ms, docs/PERFORMANCE.md).
// It is refilled after each request, so a burst of escalations pays one
// handshake; a connection older than warmMaxAge is dropped unused, because
// the coordinator closes (without an audit record: nothing was asked) a
// connection that sends no request within its 10 s handshake timeout. A
// new TLS configuration (a rotated bundle) discards it too.
type warmPool struct {
	mu      sync.Mutex
	c       *warmConn
	filling bool
	// The socket and configuration of the last request: what a refill
	// connects with.
	sock string
	cfg  *tls.Config
}

type warmConn struct {
	raw  *blockingConn
	tls  *tls.Conn
	sock string
	cfg  *tls.Config
	made time.Time // before the connect: the coordinator's timeout starts at accept
}

// warmMaxAge leaves half of the coordinator's 10 s handshake timeout: a
// warm connection the coordinator had already closed would fail its
// request.
const warmMaxAge = 5 * time.Second

type warmKey struct{}

func withWarm(ctx context.Context, p *warmPool) context.Context {
	return context.WithValue(ctx, warmKey{}, p)
}

func warmFrom(ctx context.Context) *warmPool {
	p, _ := ctx.Value(warmKey{}).(*warmPool)
	return p
}

// take returns the warm connection for sock and cfg, or nil; it notes them
// for the next refill either way.
func (p *warmPool) take(sock string, cfg *tls.Config) *warmConn {
	p.mu.Lock()
	c := p.c
	p.c, p.sock, p.cfg = nil, sock, cfg
	p.mu.Unlock()
	if c == nil {
		return nil
	}
	if c.sock != sock || c.cfg != cfg || time.Since(c.made) > warmMaxAge {
		c.raw.release()
		return nil
	}
	return c
}

// refill handshakes a new connection in the background, unless one is
// ready or under way or no request has been made yet.
func (p *warmPool) refill() {
	p.mu.Lock()
	sock, cfg := p.sock, p.cfg
	if p.filling || p.c != nil || cfg == nil {
		p.mu.Unlock()
		return
	}
	p.filling = true
	p.mu.Unlock()
	go func() {
		c := dialWarm(sock, cfg)
		p.mu.Lock()
		p.filling = false
		if p.c == nil {
			p.c, c = c, nil
		}
		p.mu.Unlock()
		if c != nil {
			c.raw.release()
		}
	}()
}

func dialWarm(sock string, cfg *tls.Config) *warmConn {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	made := time.Now()
	raw, err := dialBlocking(ctx, sock)
	if err != nil {
		return nil
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	conn := tls.Client(raw, cfg)
	err = conn.HandshakeContext(ctx)
	if !stop() || err != nil {
		raw.release()
		return nil
	}
	return &warmConn{raw: raw, tls: conn, sock: sock, cfg: cfg, made: made}
}
