package trust

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// DefaultLifetime is how long a sandbox client certificate is valid. It is
// rotated at half its lifetime, so a sandbox always finds a valid one.
const DefaultLifetime = 10 * time.Minute

// Anchor is the Trust Anchor of one coordinator run and one sandbox: the
// CA, the server certificate, and the client certificate files in the TLS
// directory, which a goroutine keeps fresh.
type Anchor struct {
	ca       *CA
	server   *Issued
	dir      string
	san      string
	lifetime time.Duration
	now      func() time.Time

	mu      sync.Mutex
	expiry  time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	closed  bool
	onError func(error)
}

// Options configure Start.
type Options struct {
	// Dir is the TLS directory (domain.Anchor.TLSDir()).
	Dir       string
	Profile   string
	SandboxID string
	// Lifetime of client certificates; DefaultLifetime when zero.
	Lifetime time.Duration
	// Now replaces time.Now in tests.
	Now func() time.Time
	// OnError is told about a failed rotation (the coordinator logs it).
	OnError func(error)
}

// Start makes the run's CA, writes the TLS directory (0700: ca.pem,
// client.pem, client-key.pem) and starts rotating the client certificate.
func Start(o Options) (*Anchor, error) {
	if o.Lifetime <= 0 {
		o.Lifetime = DefaultLifetime
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OnError == nil {
		o.OnError = func(error) {}
	}
	ca, err := NewCA(30*24*time.Hour, o.Now)
	if err != nil {
		return nil, err
	}
	t := o.Now()
	server, err := ca.IssueServer(t.Add(-time.Minute), t.Add(30*24*time.Hour))
	if err != nil {
		return nil, err
	}
	if err := domain.EnsurePrivateDir(o.Dir); err != nil {
		return nil, fmt.Errorf("trust: TLS dir: %w", err)
	}
	a := &Anchor{ca: ca, server: server, dir: o.Dir, san: SAN(o.Profile, o.SandboxID),
		lifetime: o.Lifetime, now: o.Now, onError: o.OnError, done: make(chan struct{})}
	if err := writeAtomic(o.Dir, CAFile, ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	if err := a.Rotate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go a.rotateLoop(ctx)
	return a, nil
}

// Dir is the TLS directory.
func (a *Anchor) Dir() string { return a.dir }

// SAN is the only client identity the server accepts.
func (a *Anchor) SAN() string { return a.san }

// CA is the run's certificate authority.
func (a *Anchor) CA() *CA { return a.ca }

// ServerConfig is the coordinator's tls.Config for the escalation socket.
func (a *Anchor) ServerConfig() *tls.Config { return a.ca.ServerConfig(a.server, a.san) }

// Rotate issues a fresh client certificate and replaces the files
// atomically (temporary file + rename inside the directory, which the
// sandbox sees through its read-only directory mount): the bundle first,
// then the key before the certificate; a reader of the single files that
// catches the pair in between sees a mismatch and retries (ClientConfig's
// fallback does).
func (a *Anchor) Rotate() error {
	t := a.now()
	iss, err := a.ca.IssueClient(a.san, t.Add(-30*time.Second), t.Add(a.lifetime))
	if err != nil {
		return err
	}
	if err := writeAtomic(a.dir, BundleFile, bundle(iss, a.ca.CertPEM()), 0o600); err != nil {
		return err
	}
	if err := writeAtomic(a.dir, ClientKeyFile, iss.KeyPEM, 0o600); err != nil {
		return err
	}
	if err := writeAtomic(a.dir, ClientFile, iss.CertPEM, 0o644); err != nil {
		return err
	}
	a.mu.Lock()
	a.expiry = t.Add(a.lifetime)
	a.mu.Unlock()
	return nil
}

func (a *Anchor) rotateLoop(ctx context.Context) {
	defer close(a.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.lifetime / 2):
		}
		if err := a.Rotate(); err != nil {
			a.onError(fmt.Errorf("trust: rotating the client certificate: %w", err))
		}
	}
}

// Close stops the rotation and removes the TLS directory. Safe to call
// more than once.
func (a *Anchor) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	<-a.done
	return os.RemoveAll(a.dir)
}

func writeAtomic(dir, name string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(mode)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, filepath.Join(dir, name))
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("trust: writing %s: %w", name, werr)
	}
	return nil
}
