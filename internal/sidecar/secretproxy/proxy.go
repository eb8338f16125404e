package secretproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"

	"golang.org/x/net/netutil"
)

// Options configures a Proxy.
type Options struct {
	CA *secret.CA
	// Roots verify the upstream servers (the host's trust store, plus
	// the CA of a TLS-intercepting proxy the user configured).
	Roots   *x509.CertPool
	Secrets []secret.Secret
	// Dial connects to host's HTTPS port upstream (netd resolves host
	// through its own upstream resolvers and opens the address in the
	// ruleset first). Required.
	Dial func(ctx context.Context, host string) (net.Conn, error)
	// Refused is called for every placeholder sent to a host it is not
	// for (after it was counted).
	Refused func(secret, host string)
	// Elsewhere is called for every placeholder sent to one of its hosts
	// outside the header(s) its value goes into (where: "url", "header
	// NAME", "body", "trailer NAME"), after it was counted. When nil,
	// Refused is called with host "HOST (WHERE)".
	Elsewhere func(secret, host, where string)
	Log       *slog.Logger
	Now       func() time.Time
	// UpstreamServerName, when set, is the name every upstream is
	// verified under instead of the host asked for: tests and benchmarks
	// whose upstream has a fixed test certificate. netd never sets it.
	UpstreamServerName string
}

// maxStats bounds the (secret, host) pairs counted: the agent chooses the
// names under a wildcard.
const maxStats = 256

// maxConns bounds the agent's concurrent connections to the injector.
const maxConns = 256

// Proxy serves the agent's TLS connections to the secrets' hosts.
type Proxy struct {
	o  Options
	rp *httputil.ReverseProxy

	mu      sync.Mutex
	secrets []secret.Secret
	pats    *patterns // of secrets
	certs   map[string]*tls.Certificate
	stats   map[[2]string]*secret.Stat
	srv     *http.Server
}

// ErrNotSecretHost refuses a TLS handshake for a name that is not one of
// the secrets' hosts: netd intercepts nothing else.
var ErrNotSecretHost = errors.New("not a host of any secret")

// New checks o and returns a Proxy that serves nothing yet.
func New(o Options) (*Proxy, error) {
	if o.CA == nil || o.Roots == nil || o.Dial == nil {
		return nil, errors.New("secretproxy: CA, roots and dialer are required")
	}
	for _, s := range o.Secrets {
		if err := s.Validate(); err != nil {
			return nil, err
		}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Proxy{o: o, secrets: o.Secrets, pats: newPatterns(o.Secrets), certs: map[string]*tls.Certificate{}, stats: map[[2]string]*secret.Stat{}}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return o.Dial(ctx, host)
		},
		TLSClientConfig:       trust.UpstreamClientConfig(o.Roots, o.UpstreamServerName),
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      tr,
		FlushInterval:  -1, // every write at once: server-sent events stream
		ModifyResponse: p.scrub,
		ErrorLog:       log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			o.Log.Warn("secret proxy upstream", "host", r.TLS.ServerName, "err", err)
			http.Error(w, "lazaret-netd: upstream: "+err.Error(), http.StatusBadGateway)
		},
	}
	return p, nil
}

// IsSecretHost reports whether host is a host of a secret: the resolver
// answers it with netd's own address.
func (p *Proxy) IsSecretHost(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.secrets {
		if p.secrets[i].For(host) {
			return true
		}
	}
	return false
}

// SetValue replaces the value of secret name (a refreshed token).
func (p *Proxy) SetValue(name, value string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.secrets {
		if p.secrets[i].Name == name {
			s := p.secrets[i]
			s.Value = value
			if err := s.Validate(); err != nil {
				return err
			}
			// A copy: requests in flight keep the slice they took.
			ss := append([]secret.Secret(nil), p.secrets...)
			ss[i] = s
			p.secrets = ss
			p.pats = newPatterns(ss)
			return nil
		}
	}
	return fmt.Errorf("no secret %q", name)
}

// Stats returns the counters, sorted.
func (p *Proxy) Stats() []secret.Stat {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]secret.Stat, 0, len(p.stats))
	for _, s := range p.stats {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Secret != out[j].Secret {
			return out[i].Secret < out[j].Secret
		}
		return out[i].Host < out[j].Host
	})
	return out
}

// Serve accepts the agent's connections on ln until Close.
func (p *Proxy) Serve(ln net.Listener) error {
	srv := &http.Server{
		Handler:           http.HandlerFunc(p.serveHTTP),
		TLSConfig:         trust.InterceptServerConfig(p.certificate),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	// The agent opens as many connections as it likes; netd's resolver
	// shares the process.
	err := srv.ServeTLS(netutil.LimitListener(ln, maxConns), "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving.
func (p *Proxy) Close() error {
	p.mu.Lock()
	srv := p.srv
	p.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// certificate mints (and caches) the certificate for the name the agent
// asked for, only for a secret's host.
func (p *Proxy) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	host := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	if host == "" || !p.IsSecretHost(host) {
		return nil, ErrNotSecretHost
	}
	now := p.o.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.certs[host]; ok && c.Leaf.NotAfter.Sub(now) > time.Hour {
		return c, nil
	}
	c, err := p.o.CA.Leaf(host, now)
	if err != nil {
		return nil, err
	}
	if len(p.certs) >= maxStats {
		clear(p.certs)
	}
	p.certs[host] = c
	return c, nil
}

// serveHTTP checks that the request is for the name the TLS connection
// was made to, then proxies it. The upstream connection goes to that name
// and is verified against the roots, so a secret reaches only a server
// that proves it is one of the secret's hosts.
func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	sni := strings.ToLower(strings.TrimSuffix(r.TLS.ServerName, "."))
	host := strings.ToLower(r.Host)
	if h, port, err := net.SplitHostPort(host); err == nil && port == "443" {
		host = h
	}
	if strings.TrimSuffix(host, ".") != sni {
		http.Error(w, "lazaret-netd: request for another host than the TLS server name", http.StatusMisdirectedRequest)
		return
	}
	p.rp.ServeHTTP(w, r)
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	host := strings.ToLower(strings.TrimSuffix(pr.In.TLS.ServerName, "."))
	pr.Out.URL.Scheme = "https"
	pr.Out.URL.Host = host
	pr.Out.Host = host
	// The transport asks for gzip and decodes it (a body netd scrubs must
	// be readable); no WebSocket compression either.
	pr.Out.Header.Del("Accept-Encoding")
	pr.Out.Header.Del("Sec-Websocket-Extensions")
	p.mu.Lock()
	secrets, pats := p.secrets, p.pats
	p.mu.Unlock()
	rw := RewriteRequest(pr.Out.Header, pr.Out.URL, host, secrets)
	p.count(host, rw.Injected, false)
	for _, name := range rw.Refused {
		p.refused(name, host)
	}
	for _, pl := range rw.Elsewhere {
		p.elsewhere(pl.Secret, host, pl.Where)
	}
	if pr.Out.Body != nil && pr.Out.Body != http.NoBody {
		pr.Out.Body = p.watchBody(pr, host, secrets, pats.placeholders)
	}
}

// refused counts and reports a placeholder headed for a host its secret
// is not for.
func (p *Proxy) refused(name, host string) {
	p.count(host, []string{name}, true)
	p.o.Log.Warn("placeholder sent to a host it is not for; not replaced", "secret", name, "host", host)
	if p.o.Refused != nil {
		p.o.Refused(name, host)
	}
}

// elsewhere counts and reports a placeholder headed for its own host but
// not in a header its value goes into.
func (p *Proxy) elsewhere(name, host, where string) {
	p.count(host+" ("+where+")", []string{name}, true)
	p.o.Log.Warn("placeholder outside the headers its secret goes into; not replaced", "secret", name, "host", host, "where", where)
	switch {
	case p.o.Elsewhere != nil:
		p.o.Elsewhere(name, host, where)
	case p.o.Refused != nil:
		p.o.Refused(name, host+" ("+where+")")
	}
}

// watchBody passes the request body on unchanged and reports a
// placeholder in it or in the request's trailers (each secret once).
func (p *Proxy) watchBody(pr *httputil.ProxyRequest, host string, secrets []secret.Secret, ps *patternSet) io.ReadCloser {
	seen := map[Place]bool{}
	report := func(i int, where string) {
		k := Place{secrets[i].Name, where}
		if seen[k] {
			return
		}
		seen[k] = true
		if secrets[i].For(host) {
			p.elsewhere(secrets[i].Name, host, where)
		} else {
			p.refused(secrets[i].Name, host)
		}
	}
	w := &watchReader{src: pr.Out.Body, s: scrubber{ps: ps, passAll: true}}
	w.s.found = func(i int) { report(i, "body") }
	w.eof = func() {
		for i := range secrets {
			for _, where := range carries(pr.In.Trailer, nil, secrets[i].Placeholder) {
				report(i, strings.Replace(where, "header", "trailer", 1))
			}
		}
	}
	return w
}

func (p *Proxy) scrub(resp *http.Response) error {
	p.mu.Lock()
	pats := p.pats
	p.mu.Unlock()
	return pats.values.scrubResponse(resp)
}

// CountRefused counts a placeholder seen outside an intercepted request
// (netd's resolver sees names): host is where it was headed.
func (p *Proxy) CountRefused(secret, host string) { p.count(host, []string{secret}, true) }

func (p *Proxy) count(host string, names []string, refused bool) {
	if len(names) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range names {
		k := [2]string{n, host}
		s, ok := p.stats[k]
		if !ok {
			if len(p.stats) >= maxStats {
				k[1] = "(other hosts)"
				if s, ok = p.stats[k]; !ok {
					s = &secret.Stat{Secret: n, Host: k[1]}
					p.stats[k] = s
				}
			} else {
				s = &secret.Stat{Secret: n, Host: host}
				p.stats[k] = s
			}
		}
		if refused {
			s.Refused++
		} else {
			s.Injected++
		}
	}
}

// Placeholders returns the placeholders of every secret (netd looks for
// them where it can see the agent's traffic, such as DNS names).
func (p *Proxy) Placeholders() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]string, len(p.secrets))
	for _, s := range p.secrets {
		m[s.Name] = s.Placeholder
	}
	return m
}
