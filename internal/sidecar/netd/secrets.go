package netd

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/sidecar/firewall"
	"github.com/lazaret-dev/lazaret/internal/sidecar/secretproxy"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// Secrets are injected by netd (docs/SECRETS.md): the resolver answers a
// secret's host with the injector's loopback address, where netd
// terminates TLS with a certificate of the sandbox's CA, then forwards to
// the real host (resolved by netd, verified against the host's roots)
// with the secret added. Nothing else is intercepted.

// DefaultInjectListen is where the injector listens in the namespace; the
// resolver answers the secrets' hosts with its address.
var DefaultInjectListen = netip.MustParseAddrPort("127.0.0.1:443")

// handleSecretOps answers OpSecrets and OpSecretValue; ok is false for any
// other operation.
func (d *Daemon) handleSecretOps(ctx context.Context, req netdapi.Request) (netdapi.Response, bool) {
	switch req.Op {
	case netdapi.OpSecrets:
		if err := d.startInjector(ctx, req); err != nil {
			return netdapi.Response{Error: "secrets: " + err.Error()}, true
		}
		return netdapi.Response{OK: true}, true
	case netdapi.OpSecretValue:
		d.mu.Lock()
		p := d.proxy
		d.mu.Unlock()
		if p == nil {
			return netdapi.Response{Error: "secret_value: no secrets configured"}, true
		}
		if err := p.SetValue(req.Target, req.Value); err != nil {
			return netdapi.Response{Error: "secret_value: " + err.Error()}, true
		}
		d.logChange("secret " + req.Target + ": value refreshed")
		return netdapi.Response{OK: true}, true
	}
	return netdapi.Response{}, false
}

// startInjector builds the injector from an OpSecrets request and starts
// serving it. Only once: the secrets of a sandbox are fixed at its start.
func (d *Daemon) startInjector(ctx context.Context, req netdapi.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.proxy != nil {
		return errors.New("already configured")
	}
	if len(req.Secrets) == 0 {
		return errors.New("no secrets")
	}
	ca, err := secret.ParseCA(req.CACert, req.CAKey)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(req.Roots) {
		return errors.New("no upstream root certificates")
	}
	p, err := secretproxy.New(secretproxy.Options{
		CA: ca, Roots: roots, Secrets: req.Secrets, Log: d.log,
		Dial:    d.dialSecretHost,
		Refused: d.placeholderRefused,
	})
	if err != nil {
		return err
	}
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(d.cfg.InjectListen))
	if err != nil {
		return fmt.Errorf("injector %s: %w", d.cfg.InjectListen, err)
	}
	d.proxy = p
	go func() {
		<-ctx.Done()
		p.Close()
	}()
	go func() {
		if err := p.Serve(ln); err != nil {
			d.log.Error("injector stopped", "err", err)
		}
	}()
	var hosts []string
	for _, s := range req.Secrets {
		hosts = append(hosts, s.Hosts...)
	}
	d.injecting = hosts
	d.changes = append(d.changes, netdapi.Change{Time: time.Now().UTC(), What: fmt.Sprintf("injecting %d secrets for %v", len(req.Secrets), hosts)})
	d.log.Info("injecting secrets", "count", len(req.Secrets), "hosts", hosts)
	return nil
}

// placeholderRefused reports a placeholder headed for a host it is not
// for: a notice on the user's terminals and an audit entry.
func (d *Daemon) placeholderRefused(secret, host string) {
	d.report(netdapi.DenialEvent{Dest: "secret " + secret + " placeholder to " + host, Name: host, Secret: secret,
		Reason: "placeholder sent to a host the secret is not for"})
}

// injected returns the injector when q asks for one of the secrets' hosts.
func (d *Daemon) injectorFor(name string) *secretproxy.Proxy {
	d.mu.Lock()
	p := d.proxy
	d.mu.Unlock()
	if p != nil && p.IsSecretHost(name) {
		return p
	}
	return nil
}

// checkPlaceholderName counts and reports a DNS name carrying a secret's
// placeholder (a way out netd sees without intercepting anything). DNS
// names are case-insensitive, placeholders are lower case.
func (d *Daemon) checkPlaceholderName(name string) {
	d.mu.Lock()
	p := d.proxy
	d.mu.Unlock()
	if p == nil {
		return
	}
	for secret, ph := range p.Placeholders() {
		if strings.Contains(name, ph) {
			p.CountRefused(secret, "dns "+name)
			d.placeholderRefused(secret, name)
		}
	}
}

// injectorAnswer answers a secret's host: A with the injector's address,
// anything else with no data (the injector listens on IPv4).
func (d *Daemon) injectorAnswer(q query) []byte {
	if q.question.Type != dnsmessage.TypeA {
		return reply(q, dnsmessage.RCodeSuccess)
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{
		ID: q.id, Response: true, Authoritative: true, RecursionDesired: q.rd, RecursionAvailable: true,
	})
	a := d.cfg.InjectListen.Addr().As4()
	if b.StartQuestions() != nil || b.Question(q.question) != nil || b.StartAnswers() != nil {
		return reply(q, dnsmessage.RCodeServerFailure)
	}
	hdr := dnsmessage.ResourceHeader{Name: q.question.Name, Class: dnsmessage.ClassINET, TTL: 60}
	if b.AResource(hdr, dnsmessage.AResource{A: a}) != nil {
		return reply(q, dnsmessage.RCodeServerFailure)
	}
	out, err := b.Finish()
	if err != nil {
		return reply(q, dnsmessage.RCodeServerFailure)
	}
	return out
}

// dialSecretHost connects to host's HTTPS port for the injector: host is
// resolved through the upstream resolvers like an agent's lookup (the
// learn filter applies: never the host's or special-purpose addresses),
// its addresses opened in the ruleset, and the first that answers used.
func (d *Daemon) dialSecretHost(ctx context.Context, host string) (net.Conn, error) {
	name, err := dnsmessage.NewName(host + ".")
	if err != nil {
		return nil, err
	}
	q := query{question: dnsmessage.Question{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}, name: host}
	id, msg, err := upstreamQuery(q)
	if err != nil {
		return nil, err
	}
	var lastErr error = errors.New("no upstream resolver")
	for _, u := range d.cfg.Upstreams {
		resp, err := exchange(ctx, u, id, msg, !d.cfg.NoFirewall)
		if err != nil {
			lastErr = err
			continue
		}
		_, ls, err := readAnswer(resp, id, q, d.cfg.MinTTL, d.cfg.MaxTTL)
		if err != nil {
			lastErr = err
			continue
		}
		rs, err := d.allowResolved(host, ls)
		if err != nil {
			return nil, err
		}
		if len(rs) == 0 {
			return nil, fmt.Errorf("%s: no address that may be opened", host)
		}
		return dialFirst(ctx, rs)
	}
	return nil, fmt.Errorf("resolve %s: %w", host, lastErr)
}

func dialFirst(ctx context.Context, rs []firewall.Resolved) (net.Conn, error) {
	var errs []error
	for _, r := range rs {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := (&net.Dialer{}).DialContext(dctx, "tcp", netip.AddrPortFrom(r.Addr, 443).String())
		cancel()
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}
