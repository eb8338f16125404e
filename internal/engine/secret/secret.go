// Package secret is what the CLI, the coordinator and lazaret-netd share
// about a sandbox's secrets: a secret as netd receives it (hosts, header,
// placeholder), host patterns, the per-sandbox interception CA and the
// counters netd reports. The injector itself is sidecar/secretproxy.
package secret

import (
	"fmt"
	"log/slog"
	"strings"
)

// Secret is one credential as netd receives it over its control socket.
type Secret struct {
	Name string `json:"name"`
	// Hosts are exact names or "*.suffix" (any name below suffix).
	Hosts []string `json:"hosts"`
	// Header, when set, is set on every request to Hosts, to Format with
	// {value} replaced (Format "{value}" when empty), and is the only
	// place the value goes. Without it, the placeholder is replaced in the
	// DefaultHeaders only.
	Header string `json:"header,omitempty"`
	Format string `json:"format,omitempty"`
	// Placeholder is what the agent sees; in one of the secret's headers
	// (InjectsInto) of a request to Hosts it is replaced by Value.
	Placeholder string `json:"placeholder"`
	Value       string `json:"value"`
}

// DefaultHeaders are the request headers in which the placeholder of a
// secret without Header is replaced: the ones APIs take keys in
// (Authorization: Bearer/token/Basic for most, x-api-key for Anthropic,
// api-key for Azure OpenAI, x-goog-api-key for Google, Private-Token for
// GitLab). Anywhere else (another header, a cookie, the URL, the body) it
// stays the placeholder.
var DefaultHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Private-Token"}

// InjectsInto reports whether the value goes into request header name:
// the secret's Header, or one of DefaultHeaders when it has none. Header
// names compare in any letter case.
func (s *Secret) InjectsInto(name string) bool {
	if s.Header != "" {
		return strings.EqualFold(name, s.Header)
	}
	for _, h := range DefaultHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
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
