package secretproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
)

// received are the headers of the last request an echo server got: what
// reached the upstream (the agent sees the echo only scrubbed).
var received struct {
	sync.Mutex
	h http.Header
}

// echo answers with the request headers as JSON; /sse streams two events,
// the second only after the client has confirmed receipt of the first via
// the channel (proving the first was not buffered).
func echoServer(t *testing.T, gate chan struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Lock()
		received.h = r.Header.Clone()
		received.Unlock()
		if r.URL.Path == "/sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			<-gate
			fmt.Fprint(w, "data: two\n\n")
			return
		}
		w.Header().Set("X-Echo-Proto", r.Proto)
		w.Header().Set("X-Echo-Host", r.Host)
		w.Header().Set("X-Reflect", r.Header.Get("X-Api-Key"))
		json.NewEncoder(w).Encode(r.Header)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

type fixture struct {
	proxyAddr string
	ca        *secret.CA
	proxy     *Proxy
	mu        sync.Mutex
	refused   []string
}

var testSecrets = []secret.Secret{
	{Name: "alpha", Hosts: []string{"api.alpha.test"}, Placeholder: "lzph-alpha-0123456789abcdef", Value: "ALPHA-REAL-VALUE"},
	{Name: "beta", Hosts: []string{"*.beta.test"}, Header: "X-Api-Key", Format: "Key {value}", Placeholder: "lzph-beta-0123456789abcdef0", Value: "BETA-REAL-VALUE"},
}

func newFixture(t *testing.T, upstream *httptest.Server) *fixture {
	t.Helper()
	ca, err := secret.NewCA([]string{"api.alpha.test", "*.beta.test"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(upstream.Certificate())
	f := &fixture{ca: ca}
	up := upstream.Listener.Addr().String()
	p, err := New(Options{CA: ca, Roots: roots, Secrets: testSecrets,
		// httptest's certificate names example.com; the upstream is verified
		// against that name through ServerName below.
		Dial: func(ctx context.Context, host string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", up)
		},
		Refused: func(s, h string) { f.mu.Lock(); f.refused = append(f.refused, s+"@"+h); f.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	p.rp.Transport.(*http.Transport).TLSClientConfig.ServerName = "example.com"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	t.Cleanup(func() { p.Close() })
	f.proxy, f.proxyAddr = p, ln.Addr().String()
	return f
}

// client is the agent: it trusts only the sandbox CA and reaches every
// name at the proxy (as netd's resolver answers).
func (f *fixture) client(h2 bool) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.ca.CertPEM)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", f.proxyAddr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, url string, hdr map[string]string) (http.Header, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	received.Lock()
	defer received.Unlock()
	return received.h, resp
}

func TestInjectH1H2(t *testing.T) {
	f := newFixture(t, echoServer(t, nil))
	for _, h2 := range []bool{false, true} {
		c := f.client(h2)
		got, resp := get(t, c, "https://api.alpha.test/v1", map[string]string{"Authorization": "Bearer " + testSecrets[0].Placeholder})
		if got.Get("Authorization") != "Bearer ALPHA-REAL-VALUE" {
			t.Errorf("h2=%v: upstream got %q", h2, got.Get("Authorization"))
		}
		if want := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]; resp.Proto != want || resp.Header.Get("X-Echo-Proto") != "HTTP/2.0" {
			t.Errorf("h2=%v: agent side %s, upstream %s", h2, resp.Proto, resp.Header.Get("X-Echo-Proto"))
		}
		if resp.Header.Get("X-Echo-Host") != "api.alpha.test" {
			t.Errorf("upstream Host %q", resp.Header.Get("X-Echo-Host"))
		}
		// Header mode: set whatever the agent sent, and scrubbed from a
		// response header that reflects it.
		got, resp = get(t, c, "https://x.beta.test/", map[string]string{"X-Api-Key": "anything"})
		if got.Get("X-Api-Key") != "Key BETA-REAL-VALUE" {
			t.Errorf("beta header %q", got.Get("X-Api-Key"))
		}
		if r := resp.Header.Get("X-Reflect"); strings.Contains(r, "BETA-REAL-VALUE") || !strings.Contains(r, testSecrets[1].Placeholder) {
			t.Errorf("reflected value not scrubbed: %q", r)
		}
	}
	st := f.proxy.Stats()
	if len(st) != 2 || st[0].Injected != 2 || st[1].Injected != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestPlaceholderToOtherHostRefused(t *testing.T) {
	f := newFixture(t, echoServer(t, nil))
	c := f.client(false)
	// alpha's placeholder to a beta host: unchanged, counted, reported.
	ph := testSecrets[0].Placeholder
	got, _ := get(t, c, "https://y.beta.test/?k="+ph, map[string]string{"Authorization": "Bearer " + ph})
	if got.Get("Authorization") != "Bearer "+ph {
		t.Errorf("placeholder to another secret's host became %q", got.Get("Authorization"))
	}
	if fmt.Sprint(f.refused) != "[alpha@y.beta.test]" {
		t.Errorf("reported %v", f.refused)
	}
	// Positive control: to its own host it is replaced.
	got, _ = get(t, c, "https://api.alpha.test/", map[string]string{"Authorization": "Bearer " + ph})
	if got.Get("Authorization") != "Bearer ALPHA-REAL-VALUE" {
		t.Errorf("control: %q", got.Get("Authorization"))
	}
	// In another case or percent-encoded in the query: still reported.
	get(t, c, "https://z.beta.test/?k=%6C"+strings.ToUpper(ph[1:]), nil)
	if len(f.refused) != 2 || f.refused[1] != "alpha@z.beta.test" {
		t.Errorf("encoded placeholder not reported: %v", f.refused)
	}
	for _, s := range f.proxy.Stats() {
		if s.Secret == "alpha" && s.Host == "y.beta.test" && s.Refused != 1 {
			t.Errorf("refused count %+v", s)
		}
	}
}

func TestOnlySecretHostsIntercepted(t *testing.T) {
	f := newFixture(t, echoServer(t, nil))
	c := f.client(false)
	for _, u := range []string{"https://other.test/", "https://beta.test/", "https://api.alpha.test.evil/"} {
		if resp, err := c.Get(u); err == nil {
			resp.Body.Close()
			t.Errorf("%s: handshake accepted for a name that is no secret's host", u)
		}
	}
	// A request whose Host differs from the TLS name is refused.
	req, _ := http.NewRequest("GET", "https://api.alpha.test/", nil)
	req.Host = "x.beta.test"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host/SNI mismatch: %d", resp.StatusCode)
	}
	// The CA cannot vouch for other names (name constraints).
	leaf, err := f.ca.Leaf("evil.test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(f.ca.Cert)
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "evil.test"}); err == nil {
		t.Error("a leaf for evil.test verified under the sandbox CA")
	}
	ok, _ := f.ca.Leaf("api.alpha.test", time.Now())
	if _, err := ok.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.alpha.test"}); err != nil {
		t.Errorf("control: the CA's own host does not verify: %v", err)
	}
}

func TestUpstreamVerified(t *testing.T) {
	up := echoServer(t, nil)
	f := newFixture(t, up)
	// Upstream verified against roots that do not hold its CA: no request.
	f.proxy.rp.Transport.(*http.Transport).TLSClientConfig.RootCAs = x509.NewCertPool()
	resp, err := f.client(false).Get("https://api.alpha.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("unverified upstream: status %d", resp.StatusCode)
	}
}

func TestStreamingNotBuffered(t *testing.T) {
	gate := make(chan struct{})
	f := newFixture(t, echoServer(t, gate))
	for _, h2 := range []bool{false, true} {
		resp, err := f.client(h2).Get("https://api.alpha.test/sse")
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		if err != nil || line != "data: one\n" {
			t.Fatalf("first event %q %v", line, err)
		}
		gate <- struct{}{} // only now does the server send the second
		br.ReadString('\n')
		line, _ = br.ReadString('\n')
		if line != "data: two\n" {
			t.Errorf("second event %q", line)
		}
		resp.Body.Close()
	}
}

func TestSetValueAndString(t *testing.T) {
	f := newFixture(t, echoServer(t, nil))
	if err := f.proxy.SetValue("alpha", "NEW-VALUE"); err != nil {
		t.Fatal(err)
	}
	got, _ := get(t, f.client(false), "https://api.alpha.test/", map[string]string{"Authorization": testSecrets[0].Placeholder})
	if got.Get("Authorization") != "NEW-VALUE" {
		t.Errorf("after refresh %q", got.Get("Authorization"))
	}
	if s := fmt.Sprint(testSecrets[0]) + fmt.Sprintf("%v %+v", testSecrets, testSecrets[0]); strings.Contains(s, "REAL-VALUE") {
		t.Errorf("a printed secret shows its value: %s", s)
	}
	if err := f.proxy.SetValue("alpha", "bad\r\nX: y"); err == nil {
		t.Error("a value with a line break was taken")
	}
}
