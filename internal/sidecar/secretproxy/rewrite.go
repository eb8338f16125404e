package secretproxy

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
)

// Rewrite is what one request's rewriting did: the secrets injected,
// those whose placeholder went to a host it is not for (left unchanged)
// and those whose placeholder went to one of its hosts somewhere else
// than the header(s) it is injected into (left unchanged too).
type Rewrite struct {
	Injected  []string
	Refused   []string
	Elsewhere []Place
}

// Place is a placeholder of a secret for this host found where its value
// does not go: "url", "header NAME", "body", "trailer NAME".
type Place struct{ Secret, Where string }

// RewriteRequest prepares the headers of a request bound for host (the
// TLS server name the agent asked for, which the upstream connection is
// verified against). Every secret for host sets its Header, or, without
// one, has its placeholder replaced by its value in the DefaultHeaders
// (also inside Basic credentials); its placeholder anywhere else, and a
// placeholder of any other secret, is left as it is and reported. Header
// names and the URL are never rewritten. h is the outgoing request's own
// copy.
func RewriteRequest(h http.Header, u *url.URL, host string, secrets []secret.Secret) Rewrite {
	var rw Rewrite
	for i := range secrets {
		s := &secrets[i]
		if !s.For(host) {
			if len(carries(h, u, s.Placeholder)) > 0 {
				rw.Refused = append(rw.Refused, s.Name)
			}
			continue
		}
		if inject(h, s) {
			rw.Injected = append(rw.Injected, s.Name)
		}
		for _, where := range carries(h, u, s.Placeholder) {
			rw.Elsewhere = append(rw.Elsewhere, Place{s.Name, where})
		}
	}
	return rw
}

// inject puts s's value into the header(s) it goes into.
func inject(h http.Header, s *secret.Secret) bool {
	if s.Header != "" {
		for k := range h {
			if strings.EqualFold(k, s.Header) {
				delete(h, k)
			}
		}
		h.Set(s.Header, formatValue(s.Format, s.Value))
		return true
	}
	done := false
	for k, vs := range h {
		if !s.InjectsInto(k) {
			continue
		}
		for i, v := range vs {
			if nv := replacePlaceholder(v, s); nv != v {
				vs[i] = nv
				done = true
			}
		}
	}
	return done
}

// replacePlaceholder replaces s's placeholder in a header value, also
// inside "Basic base64(user:password)" credentials (git and package
// managers send a token that way).
func replacePlaceholder(v string, s *secret.Secret) string {
	if scheme, cred, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "basic") {
		if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil && strings.Contains(string(dec), s.Placeholder) {
			return scheme + " " + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(string(dec), s.Placeholder, s.Value)))
		}
	}
	return strings.ReplaceAll(v, s.Placeholder, s.Value)
}

func formatValue(format, value string) string {
	if format == "" {
		return value
	}
	return strings.ReplaceAll(format, "{value}", value)
}

// carries returns where the placeholder appears in the request head: in
// a header name ("header name") or value ("header NAME"), or the URL
// (also percent-decoded: "url"), in any letter case; sorted, each place
// once. Only reporting depends on it: a placeholder that escapes
// detection (encoded some other way) is still only a placeholder.
func carries(h http.Header, u *url.URL, ph string) []string {
	in := func(s string) bool { return strings.Contains(strings.ToLower(s), ph) }
	var places []string
	if u != nil {
		q, _ := url.QueryUnescape(u.RawQuery)
		if in(u.String()) || in(u.Path) || in(q) {
			places = append(places, "url")
		}
	}
	for k, vs := range h {
		if in(k) && !slices.Contains(places, "header name") {
			places = append(places, "header name")
		}
		for _, v := range vs {
			if in(v) {
				places = append(places, "header "+k)
				break
			}
		}
	}
	sort.Strings(places)
	return places
}
