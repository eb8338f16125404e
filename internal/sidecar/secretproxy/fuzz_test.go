package secretproxy

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
)

// FuzzRewriteRequest: whatever header names, values and URL the agent
// writes, and whatever host it names, a secret's value leaves only on a
// request to one of that secret's hosts and only in a header it goes
// into, and another secret's placeholder is never replaced.
func FuzzRewriteRequest(f *testing.F) {
	f.Add("Authorization", "Bearer lzph-alpha-0123456789abcdef", "/v1?x=1", "api.alpha.test")
	f.Add("X-Api-Key", "lzph-alpha-0123456789abcdef", "/?k=lzph-beta-0123456789abcdef0", "a.beta.test")
	f.Add("lzph-beta-0123456789abcdef0", "lzph-alpha-0123456789abcdeflzph-alpha-0123456789abcdef", "/", "beta.test")
	f.Add("Cookie", "a=lzph-beta-0123456789abcdef0; b=lzph-alpha-0123456789abcdef", "/%2F", "x.y.beta.test")
	f.Add("X", "", "", "")
	f.Add("X-Anything", "lzph-alpha-0123456789abcdef", "/lzph-alpha-0123456789abcdef", "api.alpha.test")
	f.Add("authorization", "Basic eDpsenBoLWFscGhhLTAxMjM0NTY3ODlhYmNkZWY=", "/", "api.alpha.test")
	f.Add("Cookie", "k=lzph-alpha-0123456789abcdef", "/?lzph-beta-0123456789abcdef0", "api.alpha.test")
	f.Fuzz(func(t *testing.T, name, value, rawURL, host string) {
		secrets := append([]secret.Secret(nil), testSecrets...)
		for _, s := range secrets {
			if strings.Contains(name+value+rawURL, s.Value) {
				return // the agent cannot know a value
			}
		}
		h := http.Header{}
		h[name] = []string{value}
		u, err := url.Parse(rawURL)
		if err != nil {
			return // net/http never hands the proxy such a request
		}
		rw := RewriteRequest(h, u, host, secrets)
		var out strings.Builder
		for k, vs := range h {
			out.WriteString(k + ":" + strings.Join(vs, ",") + "\n")
		}
		out.WriteString(u.String())
		for _, s := range secrets {
			has := strings.Contains(out.String(), s.Value)
			if has && !s.For(host) {
				t.Fatalf("value of %s in a request to %q: %q", s.Name, host, out.String())
			}
			for k, vs := range h {
				if strings.Contains(k+strings.Join(vs, ","), s.Value) && !s.InjectsInto(k) {
					t.Fatalf("value of %s in header %q, which it does not go into", s.Name, k)
				}
			}
			if strings.Contains(u.String(), s.Value) {
				t.Fatalf("value of %s in the URL", s.Name)
			}
			if !s.For(host) && strings.Contains(name+value+rawURL, s.Placeholder) {
				if !strings.Contains(out.String(), s.Placeholder) && !injectedHeader(secrets, host, name) {
					t.Fatalf("placeholder of %s was changed on the way to %q", s.Name, host)
				}
				found := false
				for _, r := range rw.Refused {
					found = found || r == s.Name
				}
				if !found {
					t.Fatalf("placeholder of %s to %q not reported", s.Name, host)
				}
			}
		}
	})
}

// injectedHeader: name is a header a secret for host sets (its old value,
// whatever it held, is replaced).
func injectedHeader(secrets []secret.Secret, host, name string) bool {
	for _, s := range secrets {
		if s.For(host) && s.Header != "" && http.CanonicalHeaderKey(s.Header) == http.CanonicalHeaderKey(name) {
			return true
		}
	}
	return false
}

// FuzzScrub: whatever bytes surround a value's spelling (any form the
// scrubber knows, at any alignment) and however the stream is cut into
// reads, the spelling never reaches the reader intact, the value itself
// never in any letter case, and every byte is either the upstream's or a
// '*' (the length is kept).
func FuzzScrub(f *testing.F) {
	f.Add([]byte(`{"headers": {"Authorization": "Bearer `), []byte(`"}}`), "ALPHA-REAL-VALUE", uint8(0), uint16(7), uint16(30))
	f.Add([]byte("x"), []byte("=="), "sk-ant-api03-Zq9/x+Y_w", uint8(5), uint16(1), uint16(2))
	f.Add([]byte("data: "), []byte("\n\n"), "ghp_4fGh7Jk9LmN0pQrS", uint8(9), uint16(8), uint16(9))
	f.Add([]byte("%"), []byte("%2"), "a b&c<d>e\"f'g", uint8(2), uint16(3), uint16(300))
	f.Fuzz(func(t *testing.T, pre, post []byte, value string, form uint8, cut1, cut2 uint16) {
		if len(value) < 4 || len(value) > 200 || strings.ContainsAny(value, "\r\n\x00") || !utf8.ValidString(value) {
			return // not a value netd takes, or one the encoders mangle
		}
		if strings.Contains(value, "*") {
			return // the marker itself: a let-through beginning plus '*' may read as the value
		}
		enc := spellingsFor(value)[int(form)%len(spellingsFor(value))]
		in := string(pre) + enc + string(post)
		a, b := min(int(cut1), len(in)), min(int(cut2), len(in))
		a, b = min(a, b), max(a, b)
		r := io.MultiReader(strings.NewReader(in[:a]), strings.NewReader(in[a:b]), strings.NewReader(in[b:]))
		out, err := io.ReadAll(newScrubReader(r, valuePatterns(value), nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != len(in) {
			t.Fatalf("length %d, want %d", len(out), len(in))
		}
		for i := range out {
			if out[i] != in[i] && out[i] != '*' {
				t.Fatalf("byte %d changed to %q", i, out[i])
			}
		}
		if strings.Contains(asciiLower(string(out)), asciiLower(value)) {
			t.Fatalf("the value passed: %q", out)
		}
		if strings.Contains(string(out), enc) && !strings.Contains(enc, "*") {
			t.Fatalf("spelling %q passed: %q", enc, out)
		}
	})
}

// spellingsFor are the spellings FuzzScrub puts in the stream.
func spellingsFor(v string) []string {
	var out []string
	for _, sp := range spellings() {
		out = append(out, sp.enc(v))
	}
	return out
}
