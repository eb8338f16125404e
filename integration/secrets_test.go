//go:build integration

package integration

import (
	"compress/gzip"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/trust/trusttest"
)

// Secrets never enter the sandbox (docs/SECRETS.md): netd injects them on
// the way to their hosts. The test host is a TLS server with its own test
// CA (the profile's ca_bundle, as for a TLS-intercepting proxy) that logs
// every request it receives; the agent's client is this test binary.

const secretHelperEnv = "LZT_SECRETHELPER"

func init() {
	switch os.Getenv(secretHelperEnv) {
	case "tlsecho":
		os.Exit(tlsEcho())
	case "get":
		os.Exit(httpsGet(os.Args[1:]))
	case "bench":
		os.Exit(httpsBench(os.Args[1:]))
	case "dump":
		os.Exit(httpsDump(os.Args[1:]))
	}
}

// tlsEcho serves HTTPS on LZT_TLS_LISTEN (comma-separated) with the
// certificate in LZT_TLS_CERT/LZT_TLS_KEY and prints each request's server
// name, protocol and headers on one line to stdout (podman logs), never
// back to the client. /v1/messages answers a minimal streaming Anthropic
// Messages response.
func tlsEcho() int {
	// podman exec -d output is not logged: write to the container's main
	// process's stdout, which podman logs reads.
	out := os.Stdout
	if f, err := os.OpenFile("/proc/1/fd/1", os.O_WRONLY, 0); err == nil {
		out = f
	}
	cert, err := tls.X509KeyPair([]byte(os.Getenv("LZT_TLS_CERT")), []byte(os.Getenv("LZT_TLS_KEY")))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var hs []string
		for k, vs := range r.Header {
			hs = append(hs, strings.ToLower(k)+"="+strings.Join(vs, ","))
		}
		sort.Strings(hs)
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/bench/stream" {
			buf := make([]byte, 32<<10)
			for range 32 << 20 / len(buf) {
				w.Write(buf)
				w.(http.Flusher).Flush()
			}
			return
		}
		if strings.HasPrefix(r.URL.Path, "/bench") {
			fmt.Fprintln(w, "ok")
			return
		}
		if r.URL.Path == "/reflect" {
			fmt.Fprintf(out, "request sni=%s proto=%s path=%s url=%s %s body=%s\n", r.TLS.ServerName, r.Proto, r.URL.Path, r.URL, strings.Join(hs, " "), body)
			reflectAll(w, r, string(body))
			return
		}
		fmt.Fprintf(out, "request sni=%s proto=%s path=%s %s\n", r.TLS.ServerName, r.Proto, r.URL.Path, strings.Join(hs, " "))
		if r.URL.Path == "/v1/messages" {
			anthropicStream(w)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	errc := make(chan error)
	for _, addr := range strings.Split(os.Getenv("LZT_TLS_LISTEN"), ",") {
		srv := &http.Server{Addr: addr, Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
		go func() { errc <- srv.ListenAndServeTLS("", "") }()
	}
	fmt.Fprintln(out, "tls-ready")
	fmt.Fprintln(os.Stderr, <-errc)
	return 1
}

// reflectAll is an upstream that hands the request back, as many error
// pages and debugging endpoints do: every request header as a response
// header (as sent and lower-cased) and in a trailer, and every header
// line ("Name: value") and the body in the body in every spelling of
// reflectForms. ?gzip=1 compresses the body whatever the request
// accepts; ?drip=N writes it N bytes at a time, each flushed.
func reflectAll(w http.ResponseWriter, r *http.Request, body string) {
	var texts []string
	for k, vs := range r.Header {
		for _, v := range vs {
			texts = append(texts, k+": "+v)
			w.Header().Add("X-Echo-"+k, v)
			w.Header().Add("X-Echo-Lower-"+k, strings.ToLower(v))
		}
	}
	w.Header().Set("Trailer", "X-Echo-Trailer")
	var b strings.Builder
	for _, t := range append(texts, body) {
		for _, f := range reflectForms(t) {
			b.WriteString(f + "\n")
		}
	}
	text := b.String()
	n, _ := strconv.Atoi(r.URL.Query().Get("drip"))
	switch {
	case r.URL.Query().Get("gzip") == "1":
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, text)
		zw.Close()
	case n > 0:
		for len(text) > 0 {
			k := min(n, len(text))
			io.WriteString(w, text[:k])
			w.(http.Flusher).Flush()
			text = text[k:]
		}
	default:
		io.WriteString(w, text)
	}
	w.Header().Set("X-Echo-Trailer", r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key"))
}

// reflectForms are the spellings reflectAll hands s back in: as it is, in
// lower and upper case, percent-encoded, hex, base64 (standard and URL,
// padded and raw, at the three alignments), lower-cased base64, JSON.
func reflectForms(s string) []string {
	forms := []string{s, strings.ToLower(s), strings.ToUpper(s), url.QueryEscape(s),
		hex.EncodeToString([]byte(s)), strings.ToUpper(hex.EncodeToString([]byte(s)))}
	for _, pre := range []string{"", "a", "ab"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			forms = append(forms, enc.EncodeToString([]byte(pre+s)))
		}
	}
	forms = append(forms, strings.ToLower(base64.StdEncoding.EncodeToString([]byte(s))))
	j, _ := json.Marshal(s)
	return append(forms, string(j))
}

// anthropicStream is the smallest Messages API stream a client accepts.
func anthropicStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	events := []string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_lzt","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"LZT-DOUBLE-ANSWER"}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	}
	for _, e := range events {
		fmt.Fprint(w, e+"\n\n")
		w.(http.Flusher).Flush()
	}
}

// httpsGet is the agent's client: GET URL with "Name: value" headers,
// trusting what SSL_CERT_FILE names; prints the status and body.
func httpsGet(args []string) int {
	req, err := http.NewRequest("GET", args[0], nil)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for _, h := range args[1:] {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("status %d proto %s\n%s", resp.StatusCode, resp.Proto, b)
	if resp.StatusCode != 200 {
		return 1
	}
	return 0
}

// httpsDump is the agent's client for a reflecting host: POST URL with
// the body (GET when empty) and "Name: value" headers; prints the status,
// the response headers, the body and the trailers.
func httpsDump(args []string) int {
	method, body := "GET", io.Reader(nil)
	if args[1] != "" {
		method, body = "POST", strings.NewReader(args[1])
	}
	req, err := http.NewRequest(method, args[0], body)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for _, h := range args[2:] {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	fmt.Printf("status %d proto %s read error %v\n", resp.StatusCode, resp.Proto, err)
	resp.Header.Write(os.Stdout)
	fmt.Printf("%s\n", b)
	resp.Trailer.Write(os.Stdout)
	return 0
}

// httpsBench times 300 small GETs of URL/bench (one keep-alive client,
// after a warm-up) and one 32 MiB streamed GET of URL/bench/stream, and
// prints the median latency and the throughput.
func httpsBench(args []string) int {
	c := &http.Client{Timeout: 60 * time.Second}
	get := func(path string) (time.Duration, int64) {
		start := time.Now()
		resp, err := c.Get(args[0] + path)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start), n
	}
	get("/bench")
	var ds []time.Duration
	for range 300 {
		d, _ := get("/bench")
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	d, n := get("/bench/stream")
	fmt.Printf("median_us=%d mibps=%.0f\n", ds[len(ds)/2].Microseconds(), float64(n)/(1<<20)/d.Seconds())
	return 0
}

// secretsConfig: two secrets (alpha by placeholder, beta by header) for
// two test hosts; the profile ctl passes alpha the old way, in env.
const secretsConfig = `ca_bundle = %q
[network]
allow_domains = ["api.secret.test", "other.secret.test", "direct.secret.test"]

[secrets.alpha]
value = "env:LZT_SECRET_ALPHA"
hosts = ["api.secret.test"]

[secrets.beta]
value = "env:LZT_SECRET_BETA"
hosts = ["other.secret.test"]
header = "x-api-key"

[profiles.default]
secrets = { alpha = "ALPHA_KEY", beta = "BETA_KEY" }
volumes = [{ host = %q, container = "/run/lzt", mode = "ro" }]

[profiles.ctl]
image = "localhost/lazaret-default:latest"
env = { ALPHA_KEY = "env:LZT_SECRET_ALPHA" }
`

// secretSandbox is a running sandbox of the default profile with its
// sidecar wired to the TLS test host.
type secretSandbox struct {
	env    *Env
	f      *netFixture
	a      *domain.Anchor
	server string
	holder *bgRun
	alpha  string
	beta   string
}

func startSecretSandbox(t *testing.T, config string, listen string) *secretSandbox {
	t.Helper()
	return startSecretSandboxWith(t, config, listen, nil)
}

// startSecretSandboxWith runs before, when set, while the sandbox still
// resolves through the real upstream (an npm install), before netd's
// upstream is pointed at the test host's DNS server.
func startSecretSandboxWith(t *testing.T, config string, listen string, before func(*secretSandbox)) *secretSandbox {
	t.Helper()
	f := newNetFixture(t)
	env := NewEnv(t)
	s := &secretSandbox{env: env, f: f, alpha: randomSecret(t), beta: randomSecret(t)}
	env.ExtraEnv = []string{"LZT_SECRET_ALPHA=" + s.alpha, "LZT_SECRET_BETA=" + s.beta}
	caPEM, certPEM, keyPEM := trusttest.ServerCert(t, "api.secret.test", "other.secret.test", "direct.secret.test")
	caFile := filepath.Join(env.Root, "testca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	// The agent's client: a copy of this binary in a directory of its own
	// (the staging directory also holds the test's output).
	bin := filepath.Join(env.Root, "lzt-bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", f.helper, filepath.Join(bin, "lzt-helper")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	env.WriteConfig(fmt.Sprintf(config, caFile, bin))
	rt, err := domain.RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := filepath.EvalSymlinks(env.Workspace)
	if s.a, err = domain.New("default", ws, env.DataRoot, rt, ""); err != nil {
		t.Fatal(err)
	}
	s.holder = startBG(t, env, "exec", "--", "sleep", "900")
	Eventually(t, 2*time.Minute, "the sandbox", func() bool {
		select {
		case <-s.holder.done:
			t.Fatalf("the sandbox did not start: %s", s.holder.output())
		default:
		}
		out, _ := Podman(t, "ps", "--format", "{{.Names}}")
		return strings.Contains(out, s.a.Container()) && strings.Contains(out, s.a.Sidecar())
	})
	s.server = "lzt-sec-srv-" + f.suffix
	f.startServer(s.server)
	f.wire(s.a.Sidecar(), s.server)
	if before != nil {
		before(s)
	}
	redirectUpstream(t, f, s.a.Sidecar(), s.server)
	// The server container's own LAZARET_NETHELPER must not win.
	if out, err := Podman(t, "exec", "-d", "--env", netHelperEnv+"=", "--env", secretHelperEnv+"=tlsecho", "--env", "LZT_TLS_CERT="+string(certPEM),
		"--env", "LZT_TLS_KEY="+string(keyPEM), "--env", "LZT_TLS_LISTEN="+listen, s.server, helperPath); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(f.logs(s.server), "tls-ready") {
		if time.Now().After(deadline) {
			t.Fatalf("tls test host not ready: %s", f.logs(s.server))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s
}

// netdRSS is lazaret-netd's resident and peak memory.
func (s *secretSandbox) netdRSS() string {
	st, err := os.ReadFile("/proc/" + s.f.pid(s.a.Sidecar()) + "/status")
	if err != nil {
		return "n/a"
	}
	var out []string
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "VmHWM") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}

// requests are the lines the test host logged.
func (s *secretSandbox) requests() []string {
	var out []string
	for _, l := range strings.Split(s.f.logs(s.server), "\n") {
		if strings.HasPrefix(l, "request ") {
			out = append(out, l)
		}
	}
	return out
}

// get runs the agent's client in the sandbox; headers may use the
// sandbox's variables ($ALPHA_KEY).
func (s *secretSandbox) get(t *testing.T, url string, headers ...string) Result {
	t.Helper()
	cmd := secretHelperEnv + "=get /run/lzt/lzt-helper " + url
	for _, h := range headers {
		cmd += ` "` + h + `"`
	}
	return s.env.Run("exec", "--", "bash", "-c", cmd)
}

func TestSecretsInjected(t *testing.T) {
	s := startSecretSandbox(t, secretsConfig, "192.0.3.20:443")
	env := s.env

	// Inside the sandbox only the placeholders exist.
	out := env.MustRun("exec", "--", "bash", "-c", `echo "A=$ALPHA_KEY B=$BETA_KEY"`)
	if !strings.Contains(out, "A=lzph-") || !strings.Contains(out, "B=lzph-") || strings.Contains(out, s.alpha) {
		t.Fatalf("sandbox variables: %q", out)
	}
	phAlpha := strings.Fields(strings.TrimPrefix(strings.TrimSpace(out), "A="))[0]
	rssBefore := s.netdRSS()

	r := s.get(t, "https://api.secret.test/alpha", "Authorization: Bearer $ALPHA_KEY")
	t.Logf("agent: %s %s", r.Stdout, r.Stderr)
	if r.Code != 0 || strings.Contains(r.Stdout, s.alpha) {
		t.Fatalf("request to the secret's host: exit %d %q", r.Code, r.Stdout)
	}
	// beta is injected as a header whatever the agent sends; alpha's
	// placeholder to beta's host stays as it is and is reported.
	r = s.get(t, "https://other.secret.test/beta", "Authorization: Bearer $ALPHA_KEY")
	if r.Code != 0 {
		t.Fatalf("request to the other host: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	reqs := s.requests()
	// Logged with the values masked: the test's output is a file too.
	t.Logf("test host received:\n%s", strings.NewReplacer(s.alpha, "<alpha value>", s.beta, "<beta value>").Replace(strings.Join(reqs, "\n")))
	if len(reqs) != 2 {
		t.Fatalf("%d requests arrived, want 2", len(reqs))
	}
	if !strings.Contains(reqs[0], "sni=api.secret.test") || !strings.Contains(reqs[0], "authorization=Bearer "+s.alpha) {
		t.Errorf("the secret's host did not get the secret: %s", reqs[0])
	}
	if !strings.Contains(reqs[0], "proto=HTTP/2.0") {
		t.Errorf("upstream not HTTP/2: %s", reqs[0])
	}
	if !strings.Contains(reqs[1], "authorization=Bearer "+phAlpha) || strings.Contains(reqs[1], s.alpha) {
		t.Errorf("alpha's placeholder to another host was changed: %s", reqs[1])
	}
	if !strings.Contains(reqs[1], "x-api-key="+s.beta) {
		t.Errorf("beta's header not injected: %s", reqs[1])
	}

	// Reported: counters, a notice in the attached session, the audit.
	st := netStatus(t, env)
	got := map[string]string{}
	for _, x := range st.Secrets {
		got[x.Secret+"@"+x.Host] = fmt.Sprintf("%d/%d", x.Injected, x.Refused)
	}
	if got["alpha@api.secret.test"] != "1/0" || got["alpha@other.secret.test"] != "0/1" || got["beta@other.secret.test"] != "1/0" {
		t.Errorf("net status secrets: %v", got)
	}
	Eventually(t, 30*time.Second, "the refused placeholder's notice", func() bool {
		return strings.Contains(s.holder.output(), `lazaret: secrets: the placeholder of secret "alpha" was sent to "other.secret.test"`)
	})
	if a := env.MustRun("audit"); !strings.Contains(a, "secret.placeholder_refused") {
		t.Errorf("audit trail:\n%s", a)
	}
	text := env.MustRun("net", "status")
	if !strings.Contains(text, "alpha") || !strings.Contains(text, "other.secret.test") {
		t.Errorf("net status text:\n%s", text)
	}

	t.Logf("lazaret-netd memory: before the first request %s; after injecting %s", rssBefore, s.netdRSS())
	// The real path, measured (logged, not asserted): the agent's client
	// through netd's injector against the same test host reached directly
	// (direct.secret.test is no secret's host), alternated.
	for range 2 {
		for _, u := range []string{"https://direct.secret.test", "https://api.secret.test"} {
			r := env.Run("exec", "--", "bash", "-c", secretHelperEnv+"=bench /run/lzt/lzt-helper "+u)
			t.Logf("%s: %s", u, strings.TrimSpace(r.Stdout+r.Stderr))
		}
	}
	s.searchLeaks(t)

	// The secrets' trust store (200 KiB in the runtime dir) goes with the
	// sandbox; it is there while the sandbox runs (the control).
	if !exists(s.a.InjectBundle()) {
		t.Fatalf("control: no trust store %s while the sandbox runs", s.a.InjectBundle())
	}
	env.MustRun("stop")
	Eventually(t, 30*time.Second, "the trust store removed with the sandbox", func() bool { return !exists(s.a.InjectBundle()) })
}

// searchLeaks looks for the secrets' values everywhere the issue names,
// and runs each search once more where the value is known to be (the
// ctl profile passes alpha in env, today's way): the positive controls.
func (s *secretSandbox) searchLeaks(t *testing.T) {
	env := s.env
	needles := []string{s.alpha, s.beta}
	found := func(where, text string) bool {
		for _, n := range needles {
			if strings.Contains(text, n) {
				return true
			}
		}
		return false
	}
	// The needle goes on stdin (grep -f -), never on an argv.
	fsSearch := `grep -rlsF -f - / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; true`
	procDump := `for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; echo; done`
	pats := s.alpha + "\n" + s.beta + "\n"
	if r := env.RunStdin(pats, "exec", "--", "bash", "-c", fsSearch); strings.TrimSpace(r.Stdout) != "" || r.Code != 0 {
		t.Errorf("sandbox files holding a secret (exit %d): %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if r := env.MustRun("exec", "--", "bash", "-c", procDump); found("procs", r) || !strings.Contains(r, "lzph-") {
		t.Errorf("a sandbox process's environment or argv holds a secret (or no placeholder seen)")
	}
	if hits, n := scanCmdlines(t, needles...); len(hits) > 0 || n == 0 {
		t.Errorf("host argv holding a secret: %v (of %d)", hits, n)
	}
	// No podman (or conmon, runsc, slirp4netns, netd) process got a value
	// in its environment; the lazaret CLIs were started with it (the
	// user's shell exported it), which shows the scan reads environments.
	envHits := scanEnvirons(t, needles...)
	for comm := range envHits {
		if comm != "lazaret" {
			t.Errorf("a %s process has a secret in its environment", comm)
		}
	}
	if envHits["lazaret"] == 0 {
		t.Error("control: the environment scan misses the CLI started with the variable")
	}
	inspect, _ := Podman(t, "inspect", s.a.Container(), s.a.Sidecar())
	logs := s.f.logs(s.a.Sidecar()) + s.f.logs(s.a.Container())
	if found("podman", inspect+logs) {
		t.Error("the containers' configuration or logs hold a secret")
	}
	files := fileTexts(t, env.Root, filepath.Dir(s.a.NetdSocket()))
	if found("files", files) {
		t.Error("a file under the data root or the runtime dir (state store, logs) holds a secret")
	}
	// Positive controls.
	if !strings.Contains(files, s.a.Hash) || !strings.Contains(inspect, "lzph-") {
		t.Error("control: the file or inspect search reads nothing")
	}
	// The ctl profile passes alpha in env: the same searches find it in
	// the sandbox's processes, in a file the agent writes, and in the
	// container's configuration.
	r := env.RunStdin(pats, "exec", "ctl", "--", "bash", "-c", `printenv ALPHA_KEY > /tmp/leak; `+fsSearch+"; "+procDump+"; cat /proc/self/cgroup >/dev/null")
	if !strings.Contains(r.Stdout, "/tmp/leak") {
		t.Errorf("control: the file search misses a file holding the secret: %q", r.Stderr)
	}
	if !strings.Contains(strings.ReplaceAll(r.Stdout, "/tmp/leak", ""), s.alpha) {
		t.Error("control: the process search misses a secret passed in env")
	}
	cmd := exec.Command("sh", "-c", "sleep 3", s.alpha)
	cmd.Start()
	defer cmd.Wait()
	if hits, _ := scanCmdlines(t, needles...); len(hits) == 0 {
		t.Error("control: the argv scan misses a process with the secret on its argv")
	}
}

// scanEnvirons counts, by command name, the host processes whose
// environment (as /proc shows it) holds a needle.
func scanEnvirons(t *testing.T, needles ...string) map[string]int {
	t.Helper()
	hits := map[string]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, n := range needles {
			if strings.Contains(string(env), n) {
				comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
				hits[strings.TrimSpace(string(comm))]++
				break
			}
		}
	}
	return hits
}

// fileTexts returns the content of every regular file under dirs that
// the user can read (the state store, the coordinator log, the CA files).
func fileTexts(t *testing.T, dirs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err != nil || !de.Type().IsRegular() {
				return nil
			}
			if data, err := os.ReadFile(p); err == nil {
				b.Write(data)
			}
			return nil
		})
	}
	return b.String()
}

// TestSecretsBadInput: a secret whose source fails, or a configuration
// that sends one outside the profile's domains, is one error naming the
// file, line and key, and nothing is started: no container, no sockets.
func TestSecretsBadInput(t *testing.T) {
	env := NewEnv(t)
	rt, err := domain.RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := filepath.EvalSymlinks(env.Workspace)
	a, err := domain.New("default", ws, env.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	const base = `[network]
allow_domains = ["api.secret.test"]
[secrets.alpha]
%s
hosts = ["%s"]
[profiles.default]
secrets = { alpha = "ALPHA_KEY" }
`
	for _, c := range []struct{ source, host, want string }{
		{`command = ["/bin/sh", "-c", "echo token expired >&2; exit 3"]`, "api.secret.test", `config.toml:5: secrets.alpha.command: command "/bin/sh": exit status 3: token expired`},
		{`value = "env:LZT_UNSET_SECRET"`, "api.secret.test", "config.toml:5: secrets.alpha.value: host variable LZT_UNSET_SECRET is not set"},
		{`value = "file:/nonexistent/key"`, "api.secret.test", `config.toml:5: secrets.alpha.value: cannot read "/nonexistent/key"`},
		{`value = "env:HOME"`, "other.secret.test", `config.toml:8: profiles.default.secrets.alpha: host "other.secret.test" of secret alpha is not in the profile's allow_domains`},
	} {
		env.WriteConfig(fmt.Sprintf(base, c.source, c.host))
		r := env.Run("exec", "--", "true")
		if r.Code == 0 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s: exit %d\n%s\nwant %s", c.source, r.Code, r.Stderr, c.want)
		}
		if strings.Count(strings.TrimSpace(r.Stderr), "\n") > 2 {
			t.Errorf("%s: more than one error:\n%s", c.source, r.Stderr)
		}
		out, _ := Podman(t, "ps", "-a", "--filter", "label="+domain.LabelKey+"="+a.Hash, "--format", "{{.Names}}")
		if strings.TrimSpace(out) != "" {
			t.Errorf("%s: containers left: %s", c.source, out)
		}
		for _, p := range []string{a.NetdSocket(), a.ControlSocket()} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s: %s left", c.source, p)
			}
		}
	}
	// Positive control: with a source that works the sandbox starts.
	env.WriteConfig(fmt.Sprintf(base, `command = ["/bin/echo", "v"]`, "api.secret.test"))
	if r := env.Run("exec", "--", "printenv", "ALPHA_KEY"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "lzph-") {
		t.Errorf("control: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
}

// agentCLIConfig: Claude Code's key is a secret injected as x-api-key on
// the way to the test double of its API.
const agentCLIConfig = `ca_bundle = %q
[network]
allow_domains = ["api.secret.test", "registry.npmjs.org"]
allow_egress = [EGRESS]

[secrets.anthropic]
value = "env:LZT_SECRET_ALPHA"
hosts = ["api.secret.test"]
header = "x-api-key"

[profiles.default]
image = "localhost/lazaret-agent:latest"
secrets = { anthropic = "ANTHROPIC_API_KEY" }
volumes = [{ host = %q, container = "/run/lzt", mode = "ro" }]
`

// TestSecretsAgentCLI: Claude Code, installed from npm in the sandbox,
// answers a prompt through a test double of the Messages API; the double
// receives the real key, the CLI's process only ever had the placeholder.
// The npm install takes a minute or more: set LAZARET_TEST_AGENT_CLI=1.
func TestSecretsAgentCLI(t *testing.T) {
	if os.Getenv("LAZARET_TEST_AGENT_CLI") != "1" {
		t.Skip("set LAZARET_TEST_AGENT_CLI=1 (installs Claude Code from npm in the sandbox)")
	}
	if _, err := Podman(t, "image", "exists", "localhost/lazaret-agent:latest"); err != nil {
		t.Skip("agent image not built (lazaret image build agent)")
	}
	install := func(s *secretSandbox) {
		start := time.Now()
		r := s.env.Run("exec", "--", "bash", "-c", "npm install --no-audit --no-fund --prefix /tmp/cc @anthropic-ai/claude-code 2>&1 | tail -5 && "+
			// npm may block the package's postinstall (allowScripts): it links
			// the platform binary that came as an optional dependency.
			"cd /tmp/cc && node node_modules/@anthropic-ai/claude-code/install.cjs 2>&1 | tail -3")
		t.Logf("npm install (%v): exit %d %s %s", time.Since(start).Round(time.Second), r.Code, r.Stdout, r.Stderr)
		if r.Code != 0 {
			t.Fatal("npm install failed")
		}
	}
	// This workplace's registry answers from a documentation-range address,
	// which netd never opens from DNS: allow it explicitly, as a user would.
	addrs, err := net.LookupHost("registry.npmjs.org")
	if err != nil {
		t.Fatal(err)
	}
	var egress []string
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip.To4() != nil {
			egress = append(egress, `"`+a+`/32"`)
		}
	}
	config := strings.Replace(agentCLIConfig, "EGRESS", strings.Join(egress, ", "), 1)
	s := startSecretSandboxWith(t, config, "192.0.3.20:443", install)
	run := "cd /tmp && ANTHROPIC_BASE_URL=https://api.secret.test CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 " +
		"timeout 180 /tmp/cc/node_modules/.bin/claude -p 'Say hello' 2>&1; echo; echo rc=$?; " +
		`for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; echo; done`
	r := s.env.Run("exec", "--", "bash", "-c", run)
	mask := strings.NewReplacer(s.alpha, "<key>")
	head, _, _ := strings.Cut(r.Stdout, "rc=")
	t.Logf("claude -p: %s %s", mask.Replace(head), mask.Replace(r.Stderr))
	if !strings.Contains(r.Stdout, "LZT-DOUBLE-ANSWER") {
		t.Errorf("claude did not print the test double's answer")
	}
	if strings.Contains(r.Stdout, s.alpha) || !strings.Contains(r.Stdout, "ANTHROPIC_API_KEY=lzph-") {
		t.Error("the sandbox's processes held the key, or not the placeholder")
	}
	var msgs []string
	for _, l := range s.requests() {
		if strings.Contains(l, "path=/v1/messages") {
			msgs = append(msgs, l)
		}
	}
	t.Logf("test double received %d Messages requests: %s", len(msgs), mask.Replace(strings.Join(msgs, "\n")))
	if len(msgs) == 0 || !strings.Contains(msgs[0], "x-api-key="+s.alpha) {
		t.Error("the test double did not receive the key")
	}
}

// TestSecretsReflected (#33 item 4): the agent cannot get a secret's
// value back from a host that reflects requests. alpha (no header
// configured) goes only into Authorization: the agent puts its
// placeholder there and also in another header, a cookie, the URL and the
// body; the test host hands everything back in many spellings, in
// headers, body and trailer, plain, gzip and in small writes; the agent
// sees none of the values in any of them. Controls: the test host got the
// real value in Authorization (and the placeholder everywhere else), and
// the same reflection of a known string from a host netd does not
// intercept reaches the agent in every spelling the test looks for.
func TestSecretsReflected(t *testing.T) {
	s := startSecretSandbox(t, secretsConfig, "192.0.3.20:443")
	env := s.env
	out := env.MustRun("exec", "--", "bash", "-c", `echo "$ALPHA_KEY"`)
	ph := strings.TrimSpace(out)
	if !strings.HasPrefix(ph, "lzph-") {
		t.Fatalf("placeholder %q", ph)
	}
	mask := strings.NewReplacer(s.alpha, "<alpha value>", s.beta, "<beta value>")
	dump := func(url, body string, headers ...string) string {
		cmd := secretHelperEnv + `=dump /run/lzt/lzt-helper "` + url + `" "` + body + `"`
		for _, h := range headers {
			cmd += ` "` + h + `"`
		}
		r := env.Run("exec", "--", "bash", "-c", cmd)
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, "status 200") || !strings.Contains(r.Stdout, "read error <nil>") {
			// Only the status line: the rest may hold spellings of a value.
			line, _, _ := strings.Cut(r.Stdout, "\n")
			t.Fatalf("%s: exit %d %s %.300s", url, r.Code, line, mask.Replace(r.Stderr))
		}
		return r.Stdout
	}
	// leaked names the spellings of line (as the host reflects it) and of
	// value alone found in what the agent got.
	leaked := func(got, value, line string) []string {
		var found []string
		forms := append(reflectForms(line), strings.ToLower(value), hex.EncodeToString([]byte(value)),
			base64.RawStdEncoding.EncodeToString([]byte(value)), url.QueryEscape(value))
		for i, f := range forms {
			if strings.Contains(strings.ToLower(got), strings.ToLower(f)) {
				found = append(found, strconv.Itoa(i))
			}
		}
		return found
	}

	// Control: direct.secret.test is no secret's host; the known string
	// comes back in every spelling, so the checks below can see one.
	ctl := randomSecret(t)
	got := dump("https://direct.secret.test/reflect?drip=7", ctl, "Authorization: Bearer "+ctl)
	if n := len(leaked(got, ctl, "Authorization: Bearer "+ctl)); n != len(reflectForms("x"))+4 {
		t.Fatalf("control: %d of the spellings came back from the reflecting host: %.600s", n, got)
	}

	for _, q := range []string{"", "?gzip=1", "?drip=1", "?drip=7"} {
		got := dump("https://api.secret.test/reflect?k=$ALPHA_KEY"+strings.Replace(q, "?", "&", 1), "key=$ALPHA_KEY",
			"Authorization: Bearer $ALPHA_KEY", "X-Anything: $ALPHA_KEY", "Cookie: k=$ALPHA_KEY")
		if f := leaked(got, s.alpha, "Authorization: Bearer "+s.alpha); len(f) > 0 {
			t.Errorf("%s: alpha's value came back to the agent (spellings %v of reflectForms, then lower, hex, base64, query-escaped)", q, f)
		}
		got = dump("https://other.secret.test/reflect"+q, "", "X-Api-Key: anything")
		if f := leaked(got, s.beta, "X-Api-Key: "+s.beta); len(f) > 0 {
			t.Errorf("%s: beta's value came back to the agent (spellings %v of reflectForms, then lower, hex, base64, query-escaped)", q, f)
		}
	}

	// The host's side: the value arrived where it goes, the placeholder
	// everywhere else.
	var n int
	for _, l := range s.requests() {
		if !strings.Contains(l, "path=/reflect") || !strings.Contains(l, "sni=api.secret.test") {
			continue
		}
		n++
		for _, want := range []string{"authorization=Bearer " + s.alpha, "x-anything=" + ph, "cookie=k=" + ph, "body=key=" + ph, "url=/reflect?k=" + ph} {
			if !strings.Contains(l, want) {
				t.Errorf("the test host did not get %q: %s", mask.Replace(want), mask.Replace(l))
			}
		}
		if strings.Count(l, s.alpha) != 1 {
			t.Errorf("the value went elsewhere than Authorization: %s", mask.Replace(l))
		}
	}
	if n != 4 {
		t.Fatalf("%d reflect requests arrived at api.secret.test, want 4", n)
	}
	// Reported: the placeholder outside Authorization, counted per place.
	st := netStatus(t, env)
	places := map[string]uint64{}
	for _, x := range st.Secrets {
		if x.Secret == "alpha" && strings.HasPrefix(x.Host, "api.secret.test (") {
			places[x.Host] = x.Refused
		}
	}
	for _, where := range []string{"url", "header X-Anything", "header Cookie", "body"} {
		if places["api.secret.test ("+where+")"] != 4 {
			t.Errorf("placeholder in %s: reported %v", where, places)
		}
	}
}
