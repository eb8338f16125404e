//go:build bench

// Package secrets benchmarks netd's credential injector (internal/
// secretproxy, the code netd runs): the latency of a small HTTPS request
// and the throughput of a streamed response through the injector (TLS
// terminated, the secret injected, a second TLS connection upstream)
// against the same client talking to the upstream directly, alternated in
// the same run over loopback; and the size of the stripped lazaret-netd.
// Prints a markdown table for docs/PERFORMANCE.md. Run by `make bench`.
package secrets

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/sidecar/secretproxy"
)

const (
	host       = "api.bench.test"
	rounds     = 10
	perRound   = 200      // small requests per round and path
	streamMB   = 64       // one streamed response
	streamRuns = 5        // per path
	chunk      = 32 << 10 // the upstream flushes every chunk
	value      = "bench-secret-value-0123456789"
	ph         = "lzph-00112233445566778899aabbccddeeff"
)

func upstream(b *testing.B) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			buf := make([]byte, chunk)
			for range streamMB << 20 / chunk {
				w.Write(buf)
				w.(http.Flusher).Flush()
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	b.Cleanup(srv.Close)
	return srv
}

// clients returns the direct client and the one through the injector.
func clients(b *testing.B, up *httptest.Server) (direct, injected, injectedH1 *http.Client, injURL string) {
	upAddr := up.Listener.Addr().String()
	ca, err := secret.NewCA([]string{host}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	p, err := secretproxy.New(secretproxy.Options{CA: ca, Roots: roots,
		Secrets: []secret.Secret{{Name: "bench", Hosts: []string{host}, Header: "X-Api-Key", Placeholder: ph, Value: value}},
		Dial: func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", upAddr)
		},
		// httptest's certificate is for example.com: the injector verifies
		// the upstream under that name, as netd verifies the real host's.
		UpstreamServerName: "example.com",
	})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(ln)
	b.Cleanup(func() { p.Close() })
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AppendCertsFromPEM(ca.CertPEM)
	mk := func(addr string, rootsFor *x509.CertPool, name string, h2 bool) *http.Client {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			},
			TLSClientConfig:   &tls.Config{RootCAs: rootsFor, ServerName: name},
			ForceAttemptHTTP2: h2,
		}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		return &http.Client{Transport: tr}
	}
	return mk(upAddr, roots, "example.com", true), mk(ln.Addr().String(), sandboxRoots, host, true),
		mk(ln.Addr().String(), sandboxRoots, host, false), "https://" + host
}

func get(b *testing.B, c *http.Client, url string) time.Duration {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != 200 || n == 0 {
		b.Fatalf("%s: status %d, %d bytes", url, resp.StatusCode, n)
	}
	return d
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func BenchmarkSecrets(b *testing.B) {
	up := upstream(b)
	direct, injected, injectedH1, injURL := clients(b, up)
	directURL := "https://example.com"
	// Warm both (connections, the minted certificate).
	get(b, direct, directURL+"/")
	get(b, injected, injURL+"/")
	get(b, injectedH1, injURL+"/")
	var dLat, iLat, hLat []time.Duration
	for range rounds {
		for range perRound {
			dLat = append(dLat, get(b, direct, directURL+"/"))
			iLat = append(iLat, get(b, injected, injURL+"/"))
			hLat = append(hLat, get(b, injectedH1, injURL+"/"))
		}
	}
	var dTP, iTP, hTP []float64
	for range streamRuns {
		dTP = append(dTP, float64(streamMB)/get(b, direct, directURL+"/stream").Seconds())
		iTP = append(iTP, float64(streamMB)/get(b, injected, injURL+"/stream").Seconds())
		hTP = append(hTP, float64(streamMB)/get(b, injectedH1, injURL+"/stream").Seconds())
	}
	slices.Sort(dTP)
	slices.Sort(iTP)
	slices.Sort(hTP)
	dm, im, hm := median(dLat), median(iLat), median(hLat)
	dt, it, ht := dTP[len(dTP)/2], iTP[len(iTP)/2], hTP[len(hTP)/2]
	size := netdSize(b)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	fmt.Printf("\n| secrets: injector vs direct (loopback, HTTP/2, same run) | direct | through the injector | ratio / added |\n|---|---|---|---|\n")
	fmt.Printf("| small GET, median of %d | %v | %v | +%v |\n", rounds*perRound, dm.Round(time.Microsecond), im.Round(time.Microsecond), (im - dm).Round(time.Microsecond))
	fmt.Printf("| small GET, agent side HTTP/1.1, median of %d | %v | %v | +%v |\n", rounds*perRound, dm.Round(time.Microsecond), hm.Round(time.Microsecond), (hm - dm).Round(time.Microsecond))
	fmt.Printf("| %d MiB streamed (flushed every %d KiB), median of %d | %.0f MiB/s | %.0f MiB/s | %.2f× |\n", streamMB, chunk>>10, streamRuns, dt, it, it/dt)
	fmt.Printf("| the same, agent side HTTP/1.1 | %.0f MiB/s | %.0f MiB/s | %.2f× |\n", dt, ht, ht/dt)
	fmt.Printf("| lazaret-netd stripped binary | | %s | |\n", size)
	fmt.Printf("| Go heap in use after the run (client, upstream and injector in one process) | | %.1f MiB | |\n\n", float64(ms.HeapInuse)/(1<<20))
	if im-dm > time.Millisecond {
		fmt.Printf("note: the injector adds more than 1 ms at the median\n")
	}
	if it < 0.9*dt {
		fmt.Printf("note: streaming through the injector is below 0.9× direct\n")
	}
}

func netdSize(b *testing.B) string {
	// make bench stages the release build (make build: stripped) in
	// LAZARET_BIN; from a source tree, build it the same way.
	out := filepath.Join(os.Getenv("LAZARET_BIN"), "lazaret-netd")
	if os.Getenv("LAZARET_BIN") == "" {
		out = filepath.Join(b.TempDir(), "lazaret-netd")
		root, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			return "n/a (no go toolchain)"
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/lazaret-netd")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			return "n/a: " + strings.TrimSpace(string(o))
		}
	}
	fi, err := os.Stat(out)
	if err != nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f MiB", float64(fi.Size())/(1<<20))
}
