//go:build kube

package kube_test

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/trust/trusttest"
)

// secretHost is the secret's host: the upstream resolves it to
// secretAddr, an address the test adds to the CNI bridge on the host
// (netd opens no private address, so not the bridge's own; the bridge and
// the address go with `kube-cluster down`), where secretServer listens.
const (
	secretHost = "api.secret.e2e.test"
	secretAddr = "192.0.3.51"
)

// secretServer is an HTTPS server on secretAddr, port 443, with
// a certificate of its own test CA (caFile), recording the headers of
// every request.
type secretServer struct {
	caFile string
	mu     sync.Mutex
	seen   []http.Header
}

func startSecretServer(t *testing.T) *secretServer {
	t.Helper()
	if out, err := exec.Command("ip", "addr", "add", secretAddr+"/32", "dev", bridgeName).CombinedOutput(); err != nil {
		t.Fatalf("ip addr add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", secretAddr+"/32", "dev", bridgeName).Run() })
	ip := netip.MustParseAddr(secretAddr)
	caPEM, certPEM, keyPEM := trusttest.ServerCert(t, secretHost)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s := &secretServer{caFile: filepath.Join(t.TempDir(), "e2e-ca.pem")}
	if err := os.WriteFile(s.caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", netip.AddrPortFrom(ip, 443).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.seen = append(s.seen, r.Header.Clone())
			s.mu.Unlock()
			w.WriteHeader(http.StatusNotFound)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	upstreamNames.Store(secretHost+".", ip)
	t.Cleanup(func() { upstreamNames.Delete(secretHost + ".") })
	return s
}

// headers are the values of header name the server received.
func (s *secretServer) headers(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, h := range s.seen {
		out = append(out, h.Values(name)...)
	}
	return out
}

// sandboxSearch lists, in the agent container, every process environment
// and command line and every file (outside /proc, /sys, /dev) holding
// value. Its pattern brackets a character so that the search's own
// command line does not hold the value.
func sandboxSearch(value string) string {
	pattern := value[:1] + "[" + value[1:2] + "]" + value[2:]
	return `for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' <"$f" 2>/dev/null | grep -q '` + pattern + `' && echo "FOUND $f"; done; ` +
		`grep -rlsI --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev '` + pattern + `' / | sed 's/^/FOUND /'; echo SEARCHED`
}

// TestBackendSecrets: a profile's secret on the Kubernetes backend. The
// agent's HTTPS request to the secret's host (through netd, verified
// with the sandbox CA's bundle) carries only the placeholder; the test
// host receives the real value. Inside the agent container no process
// environment, command line or file holds the value, nor does the pod's
// spec; the Secret does (control), and a profile passing the same value
// in `env` exposes it to the same search (control).
func TestBackendSecrets(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true")
	srv := startSecretServer(t)
	var b [8]byte
	_, _ = rand.Read(b[:])
	value := "e2esecret" + hex.EncodeToString(b[:])
	t.Setenv("LZT_E2E_SECRET", value)
	e.setProfile(`[secrets.tok]
value = "env:LZT_E2E_SECRET"
hosts = ["` + secretHost + `"]
header = "Authorization"
format = "Bearer {value}"
[profiles.sec]
image = "` + gitImage + `"
ca_bundle = "` + srv.caFile + `"
allow_domains = ["` + secretHost + `"]
secrets = { tok = "TOK" }
persistent_dirs = []
[profiles.leak]
image = "` + gitImage + `"
env = { LEAK = "` + value + `" }
persistent_dirs = []`)

	// git's HTTPS client (libcurl) verifies netd's certificate with
	// GIT_SSL_CAINFO, the pod's CA bundle; the request fails as a git
	// request (404) once the server has seen it.
	out, errOut, _ := e.lazaret(nil, "exec", "sec", "--", "sh", "-c",
		`echo "PH=$TOK"; git -c http.extraHeader="X-Token: $TOK" ls-remote https://`+secretHost+`/repo 2>&1; true`)
	if !strings.Contains(out, "PH=lzph-") {
		t.Fatalf("the agent's TOK is not a placeholder:\n%s\n%s", out, errOut)
	}
	if got := srv.headers("Authorization"); len(got) == 0 || got[0] != "Bearer "+value {
		t.Errorf("the host received Authorization %q, want the value\n%s", got, out)
	}
	// The value goes only into the header the secret names (issue 33):
	// the placeholder anywhere else reaches the host as it is.
	ph := ""
	if i := strings.Index(out, "PH="); i >= 0 {
		ph = strings.Fields(out[i+3:])[0]
	}
	if got := srv.headers("X-Token"); len(got) == 0 || got[0] != ph || strings.Contains(got[0], value) {
		t.Errorf("the host received X-Token %q, want the placeholder %q left as it is", got, ph)
	}
	if strings.Contains(out, value) || strings.Contains(errOut, value) {
		t.Errorf("the value is in lazaret's output")
	}

	found := e.mustLazaret(nil, "exec", "sec", "--", "sh", "-c", sandboxSearch(value))
	if !strings.Contains(found, "SEARCHED") || strings.Contains(found, "FOUND") {
		t.Errorf("the agent container holds the value:\n%s", found)
	}
	pods := e.kube("-n", e.namespace, "get", "pods,configmaps,sandboxtemplates,sandboxclaims", "-o", "json")
	if strings.Contains(pods, value) {
		t.Errorf("the value is in the pods, ConfigMaps, templates or claims")
	}
	if secrets := e.kube("-n", e.namespace, "get", "secrets", "-o", "json"); !strings.Contains(secrets, b64(value)) {
		t.Errorf("control: the namespace's Secrets do not hold the value")
	}

	// Control: the value passed in the profile's env is found by the same
	// search.
	leaked := e.mustLazaret(nil, "exec", "leak", "--", "sh", "-c", sandboxSearch(value))
	if !strings.Contains(leaked, "FOUND /proc/") {
		t.Errorf("control: the search does not find the value passed in env:\n%s", leaked)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
