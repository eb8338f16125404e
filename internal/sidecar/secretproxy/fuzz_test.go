package secretproxy

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/secret"
)

// FuzzRewriteRequest: whatever header names, values and URL the agent
// writes, and whatever host it names, a secret's value leaves only on a
// request to one of that secret's hosts, and another secret's placeholder
// is never replaced.
func FuzzRewriteRequest(f *testing.F) {
	f.Add("Authorization", "Bearer lzph-alpha-0123456789abcdef", "/v1?x=1", "api.alpha.test")
	f.Add("X-Api-Key", "lzph-alpha-0123456789abcdef", "/?k=lzph-beta-0123456789abcdef0", "a.beta.test")
	f.Add("lzph-beta-0123456789abcdef0", "lzph-alpha-0123456789abcdeflzph-alpha-0123456789abcdef", "/", "beta.test")
	f.Add("Cookie", "a=lzph-beta-0123456789abcdef0; b=lzph-alpha-0123456789abcdef", "/%2F", "x.y.beta.test")
	f.Add("X", "", "", "")
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
