package secretproxy

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// reflected is what a reflecting upstream received last.
var reflected struct {
	sync.Mutex
	h      http.Header
	body   string
	url    string
	trails http.Header
}

// reflectServer echoes everything it receives back, in many spellings:
// every request header and the body, as they are, in lower and upper
// case, base64 (standard and URL, padded and raw, after a prefix that
// shifts the alignment), percent-encoded, hex, HTML- and JSON-escaped; in
// response headers, the body and a trailer. ?gzip=1 compresses the body
// whatever the request accepts, ?coding=X claims another content coding,
// ?drip=N writes the body N bytes at a time (each flushed).
func reflectServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reflected.Lock()
		reflected.h, reflected.body, reflected.url, reflected.trails = r.Header.Clone(), string(body), r.URL.String(), r.Trailer.Clone()
		reflected.Unlock()
		var texts []string
		for k, vs := range r.Header {
			for _, v := range vs {
				texts = append(texts, k+": "+v)
				w.Header().Add("X-Echo-"+k, v)
				w.Header().Add("x-echo-lower-"+k, strings.ToLower(v))
			}
		}
		texts = append(texts, string(body))
		w.Header().Set("Trailer", "X-Echo-Trailer")
		var out strings.Builder
		for _, s := range texts {
			for _, form := range reflectForms(s) {
				out.WriteString(form + "\n")
			}
		}
		js, _ := json.Marshal(r.Header)
		out.Write(js)
		writeReflection(w, r, out.String())
		w.Header().Set("X-Echo-Trailer", r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key"))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func reflectForms(s string) []string {
	forms := []string{s, strings.ToLower(s), strings.ToUpper(s), url.QueryEscape(s), html.EscapeString(s),
		hex.EncodeToString([]byte(s)), strings.ToUpper(hex.EncodeToString([]byte(s)))}
	for _, pre := range []string{"", "a", "ab"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			forms = append(forms, enc.EncodeToString([]byte(pre+s)))
		}
	}
	forms = append(forms, strings.ToLower(base64.StdEncoding.EncodeToString([]byte(s))))
	b, _ := json.Marshal(s)
	return append(forms, string(b))
}

func writeReflection(w http.ResponseWriter, r *http.Request, text string) {
	q := r.URL.Query()
	if c := q.Get("coding"); c != "" {
		w.Header().Set("Content-Encoding", c)
	}
	if q.Get("gzip") == "1" {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, text)
		zw.Close()
		return
	}
	n := 0
	fmt.Sscan(q.Get("drip"), &n)
	if n == 0 {
		io.WriteString(w, text)
		return
	}
	for len(text) > 0 {
		k := min(n, len(text))
		io.WriteString(w, text[:k])
		w.(http.Flusher).Flush()
		text = text[k:]
	}
}

// agentResponse is everything the agent received: the status, headers,
// body and trailers, as one text.
func agentResponse(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: body: %v", req.URL, err)
	}
	var all strings.Builder
	for _, h := range []http.Header{resp.Header, resp.Trailer} {
		for k, vs := range h {
			fmt.Fprintf(&all, "%s: %s\n", k, strings.Join(vs, ", "))
		}
	}
	all.Write(body)
	return resp.StatusCode, all.String()
}

// TestReflectedValueScrubbed: an upstream that echoes the request (the
// injected header included) in every spelling, in headers, body and
// trailer, compressed or not, in small writes, over HTTP/1.1 and HTTP/2,
// hands the agent no four bytes of the value in any reading. Controls:
// the upstream received the real value, and the same upstream asked
// directly with the value returns it in those readings.
func TestReflectedValueScrubbed(t *testing.T) {
	up := reflectServer(t)
	f := newFixture(t, up)
	alpha, beta := testSecrets[0], testSecrets[1]

	direct := up.Client()
	req, _ := http.NewRequest("GET", up.URL+"/?drip=5", nil)
	req.Header.Set("Authorization", "Bearer "+alpha.Value)
	if _, all := agentResponse(t, direct, req); leaks(all, alpha.Value) == "" {
		t.Fatalf("control: the upstream does not reflect the value: %.300s", all)
	}

	for _, h2 := range []bool{false, true} {
		c := f.client(h2)
		for _, q := range []string{"", "?gzip=1", "?drip=1", "?drip=7", "?drip=4096"} {
			for _, target := range []struct{ url, header, value, sent string }{
				{"https://api.alpha.test/" + q, "Authorization", "Bearer " + alpha.Placeholder, "Bearer " + alpha.Value},
				{"https://x.beta.test/" + q, "X-Api-Key", "whatever", "Key " + beta.Value},
			} {
				req, _ := http.NewRequest("POST", target.url, strings.NewReader("body"))
				req.Header.Set(target.header, target.value)
				req.Header.Set("Accept-Encoding", "gzip, br")
				status, all := agentResponse(t, c, req)
				reflected.Lock()
				got := reflected.h.Get(target.header)
				reflected.Unlock()
				if got != target.sent {
					t.Errorf("h2=%v %s: control: the upstream got %q", h2, target.url, got)
				}
				for _, s := range []string{alpha.Value, beta.Value} {
					if where := leaks(all, s); where != "" || status != 200 {
						t.Errorf("h2=%v %s: status %d, the value reached the agent (%s): %.400s", h2, target.url, status, where, all)
					}
				}
			}
		}
	}
}

// TestUnreadableCodingRefused: a body in a content coding netd cannot
// decode (the upstream ignored Accept-Encoding) never reaches the agent.
func TestUnreadableCodingRefused(t *testing.T) {
	f := newFixture(t, reflectServer(t))
	req, _ := http.NewRequest("GET", "https://api.alpha.test/?coding=br", nil)
	req.Header.Set("Authorization", "Bearer "+testSecrets[0].Placeholder)
	status, all := agentResponse(t, f.client(true), req)
	if status != http.StatusBadGateway || strings.Contains(all, testSecrets[0].Value) {
		t.Errorf("br response: %d %.300s", status, all)
	}
	// Control: in identity the same request is answered.
	req, _ = http.NewRequest("GET", "https://api.alpha.test/?coding=identity", nil)
	if status, _ := agentResponse(t, f.client(true), req); status != 200 {
		t.Errorf("control: identity answered %d", status)
	}
}

// TestPlaceholderElsewhereNotInjected: on the secret's own host the value
// goes only into its header(s); the placeholder in the URL, another
// header, a cookie, the body or a trailer arrives as the placeholder and
// is reported. Controls: the same placeholder in Authorization (any
// letter case of the name, also inside Basic credentials) is replaced.
func TestPlaceholderElsewhereNotInjected(t *testing.T) {
	f := newFixture(t, reflectServer(t))
	alpha := testSecrets[0]
	ph := alpha.Placeholder
	for _, tc := range []struct {
		name, where string
		req         func() *http.Request
	}{
		{"query", "url", func() *http.Request { return newReq("GET", "/?key="+ph, "") }},
		{"path", "url", func() *http.Request { return newReq("GET", "/v1/"+ph, "") }},
		{"other header", "header X-Anything", func() *http.Request { return newReq("GET", "/", "", "X-Anything", ph) }},
		{"cookie", "header Cookie", func() *http.Request { return newReq("GET", "/", "", "Cookie", "k="+ph) }},
		{"body", "body", func() *http.Request { return newReq("POST", "/", `{"key":"`+ph+`"}`) }},
		{"body upper case", "body", func() *http.Request { return newReq("POST", "/", strings.ToUpper(ph)) }},
		{"trailer", "trailer X-Key", func() *http.Request {
			r := newReq("POST", "/", "")
			r.Body = io.NopCloser(strings.NewReader("some body"))
			r.ContentLength = -1
			r.Trailer = http.Header{"X-Key": {ph}}
			return r
		}},
	} {
		for _, h2 := range []bool{false, true} {
			f.mu.Lock()
			f.refused = nil
			f.mu.Unlock()
			status, _ := agentResponse(t, f.client(h2), tc.req())
			reflected.Lock()
			seen := fmt.Sprint(reflected.h, reflected.body, reflected.url, reflected.trails)
			reflected.Unlock()
			if status != 200 || strings.Contains(seen, alpha.Value) {
				t.Errorf("%s h2=%v: status %d, the value was injected: %s", tc.name, h2, status, seen)
			}
			if !strings.Contains(strings.ToLower(seen), ph) && tc.name != "trailer" {
				t.Errorf("%s h2=%v: the placeholder did not arrive unchanged: %s", tc.name, h2, seen)
			}
			f.mu.Lock()
			got := slices.Clone(f.refused)
			f.mu.Unlock()
			if want := "alpha@api.alpha.test (" + tc.where + ")"; !slices.Contains(got, want) {
				t.Errorf("%s h2=%v: reported %v, want %s", tc.name, h2, got, want)
			}
		}
	}
	// Controls: replaced in Authorization whatever the name's case, and in
	// Basic credentials (git sends a token that way).
	for _, h := range []struct{ name, value, want string }{
		{"AUTHORIZATION", "Bearer " + ph, "Bearer " + alpha.Value},
		{"authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+ph)),
			"Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+alpha.Value))},
	} {
		r := newReq("GET", "/", "")
		r.Header[h.name] = []string{h.value}
		agentResponse(t, f.client(true), r)
		reflected.Lock()
		got := reflected.h.Get("Authorization")
		reflected.Unlock()
		if got != h.want {
			t.Errorf("control %s: upstream got %q", h.name, got)
		}
	}
}

func newReq(method, path, body string, hdr ...string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, _ := http.NewRequest(method, "https://api.alpha.test"+path, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r
}

// TestUpgradedStreamScrubbed: after a protocol switch (WebSocket) the
// stream towards the agent is scrubbed too, and the agent's bytes still
// reach the upstream. Control: the upstream got the real value.
func TestUpgradedStreamScrubbed(t *testing.T) {
	var got string
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.WriteString("echo " + got + "\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString("again " + strings.ToLower(got) + " " + line)
		brw.Flush()
	}))
	up.StartTLS()
	t.Cleanup(up.Close)
	f := newFixture(t, up)
	req := newReq("GET", "/ws", "", "Authorization", "Bearer "+testSecrets[0].Placeholder, "Connection", "Upgrade", "Upgrade", "websocket")
	resp, err := f.client(false).Transport.RoundTrip(req) // (a Client's timeout hides the writable body)
	if err != nil {
		t.Fatal(err)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		t.Fatalf("status %d, writable body %v", resp.StatusCode, ok)
	}
	defer rwc.Close()
	io.WriteString(rwc, "ping\n")
	all, _ := io.ReadAll(rwc)
	if got != "Bearer "+testSecrets[0].Value {
		t.Errorf("control: the upstream got %q", got)
	}
	if strings.Contains(strings.ToLower(string(all)), strings.ToLower(testSecrets[0].Value)) || !strings.Contains(string(all), "ping") {
		t.Errorf("the agent read %q", all)
	}
}
