// Package secretproxy is lazaret-netd's credential injector: a TLS
// terminating HTTP proxy for the hosts of a sandbox's secrets only. The
// agent holds a random placeholder; requests it sends to a secret's hosts
// leave with the real value, requests to any other host never get it.
package secretproxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// Secret is one credential as netd receives it over its control socket.
type Secret struct {
	Name string `json:"name"`
	// Hosts are exact names or "*.suffix" (any name below suffix).
	Hosts []string `json:"hosts"`
	// Header, when set, is set on every request to Hosts, to Format with
	// {value} replaced (Format "{value}" when empty).
	Header string `json:"header,omitempty"`
	Format string `json:"format,omitempty"`
	// Placeholder is what the agent sees; in a request header to Hosts it
	// is replaced by Value.
	Placeholder string `json:"placeholder"`
	Value       string `json:"value"`
}

// String never shows the value (a Secret printed by mistake stays safe).
func (s Secret) String() string {
	return fmt.Sprintf("secret %s hosts=%v header=%q", s.Name, s.Hosts, s.Header)
}

// LogValue keeps the value out of structured logs.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Validate checks what netd needs to inject s safely.
func (s Secret) Validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("secret without a name")
	case len(s.Hosts) == 0:
		return fmt.Errorf("secret %s: no hosts", s.Name)
	case len(s.Placeholder) < 16:
		return fmt.Errorf("secret %s: placeholder too short", s.Name)
	case s.Value == "":
		return fmt.Errorf("secret %s: empty value", s.Name)
	case strings.ContainsAny(s.Value, "\r\n\x00"):
		return fmt.Errorf("secret %s: value has a line break or NUL", s.Name)
	case s.Header != "" && !validHeaderName(s.Header):
		return fmt.Errorf("secret %s: invalid header name %q", s.Name, s.Header)
	}
	for _, h := range s.Hosts {
		if err := CheckHostPattern(h); err != nil {
			return fmt.Errorf("secret %s: %w", s.Name, err)
		}
	}
	return nil
}

func validHeaderName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return true
}

// CheckHostPattern accepts a lower-case DNS name or "*.suffix" whose suffix
// has at least two labels: "*.com" or "*" would send a key to anyone.
func CheckHostPattern(p string) error {
	name := strings.TrimPrefix(p, "*.")
	if name == "" || strings.Contains(name, "*") || p != strings.ToLower(p) {
		return fmt.Errorf("host %q: want a lower-case name or *.name", p)
	}
	labels := strings.Split(name, ".")
	if strings.HasPrefix(p, "*.") && len(labels) < 2 {
		return fmt.Errorf("host %q: a wildcard needs at least two labels after the *", p)
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("host %q: bad label", p)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("host %q: character %q not allowed", p, c)
			}
		}
	}
	return nil
}

// MatchHost reports whether host (lower case, no trailing dot) is pattern
// or, for "*.suffix", a name below suffix.
func MatchHost(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+suffix) && len(host) > len(suffix)+1
	}
	return host == pattern
}

// For reports whether s may go to host.
func (s *Secret) For(host string) bool {
	for _, p := range s.Hosts {
		if MatchHost(p, host) {
			return true
		}
	}
	return false
}

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
func RewriteRequest(h http.Header, u *url.URL, host string, secrets []Secret) Rewrite {
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
func ScrubResponse(h http.Header, secrets []Secret) {
	for i := range secrets {
		replaceInValues(h, secrets[i].Value, secrets[i].Placeholder)
	}
}
