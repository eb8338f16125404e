package secretproxy

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/secret"
)

// Rewrite is what one request's rewriting did: the secrets injected and
// those whose placeholder went to a host it is not for (left unchanged).
type Rewrite struct {
	Injected []string
	Refused  []string
}

// RewriteRequest prepares the headers of a request bound for host (the
// TLS server name the agent asked for, which the upstream connection is
// verified against). Every secret for host has its placeholder replaced
// by its value in header values and sets its header; a placeholder of any
// other secret, in a header or in the URL, is left as it is and reported.
// Header names and the URL are never rewritten. h is the outgoing
// request's own copy.
func RewriteRequest(h http.Header, u *url.URL, host string, secrets []secret.Secret) Rewrite {
	var rw Rewrite
	for i := range secrets {
		s := &secrets[i]
		if s.For(host) {
			if replaceInValues(h, s.Placeholder, s.Value) || s.Header != "" {
				rw.Injected = append(rw.Injected, s.Name)
			}
			if s.Header != "" {
				h.Set(s.Header, formatValue(s.Format, s.Value))
			}
			continue
		}
		if carries(h, u, s.Placeholder) {
			rw.Refused = append(rw.Refused, s.Name)
		}
	}
	return rw
}

func formatValue(format, value string) string {
	if format == "" {
		return value
	}
	return strings.ReplaceAll(format, "{value}", value)
}

// replaceInValues replaces old by repl in every header value.
func replaceInValues(h http.Header, old, repl string) bool {
	done := false
	for _, vs := range h {
		for i, v := range vs {
			if strings.Contains(v, old) {
				vs[i] = strings.ReplaceAll(v, old, repl)
				done = true
			}
		}
	}
	return done
}

// carries reports whether the placeholder appears anywhere in the request
// head: a header name or value, or the URL (also percent-decoded), in any
// letter case. Only reporting depends on it: a placeholder that escapes
// detection (encoded some other way) is still only a placeholder.
func carries(h http.Header, u *url.URL, ph string) bool {
	in := func(s string) bool { return strings.Contains(strings.ToLower(s), ph) }
	if u != nil {
		q, _ := url.QueryUnescape(u.RawQuery)
		if in(u.String()) || in(u.Path) || in(q) {
			return true
		}
	}
	for k, vs := range h {
		if in(k) {
			return true
		}
		for _, v := range vs {
			if in(v) {
				return true
			}
		}
	}
	return false
}

// ScrubResponse replaces the value of every secret by its placeholder in
// response headers: a service that echoes a request header back (some
// error pages do) must not hand the key to the agent that way.
func ScrubResponse(h http.Header, secrets []secret.Secret) {
	for i := range secrets {
		replaceInValues(h, secrets[i].Value, secrets[i].Placeholder)
	}
}
