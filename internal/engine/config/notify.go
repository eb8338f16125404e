package config

import (
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Notify is the [notify] section: the notifiers told of a pending
// approval and the other events of an unattended sandbox. Zero: none.
// docs/NOTIFY.md says what each sends.
type Notify struct {
	// Desktop: the freedesktop Notifications service on the user's
	// session bus.
	Desktop bool
	// Webhook and Ntfy are nil when not configured.
	Webhook *Webhook
	Ntfy    *Ntfy
	// Command is run (no shell) with the event as JSON on stdin.
	Command []string
	// IncludeRequest adds the request's text (the sandbox's words,
	// escaped and shortened) to every notification.
	IncludeRequest bool
}

// Any reports whether a notifier is configured.
func (n Notify) Any() bool {
	return n.Desktop || n.Webhook != nil || n.Ntfy != nil || len(n.Command) > 0
}

// Webhook is notify.webhook: an HTTPS endpoint given each event as a JSON
// body signed with HMAC-SHA256 of Secret.
type Webhook struct {
	URL string
	// Secret is the signing key's source (env:VAR or file:PATH, as a
	// [secrets.NAME] value); engine/secretfetch.Value reads it.
	Secret *Secret
}

// CheckSecret reports why the webhook's secret cannot be read now (an
// unset variable, a file that is not the user's own 0600 file), located
// at notify.webhook.secret; nil when it can.
func (w *Webhook) CheckSecret() error {
	if err := w.Secret.check(); err != nil {
		return w.Secret.Locate(err)
	}
	return nil
}

// Ntfy is notify.ntfy: a POST to URL/Topic (an ntfy.sh server).
type Ntfy struct {
	URL   string
	Topic string
}

// Endpoint is the URL notifications are posted to.
func (n *Ntfy) Endpoint() string { return strings.TrimSuffix(n.URL, "/") + "/" + n.Topic }

type fileNotify struct {
	Desktop        *bool        `toml:"desktop"`
	Webhook        *fileWebhook `toml:"webhook"`
	Ntfy           *fileNtfy    `toml:"ntfy"`
	Command        []string     `toml:"command"`
	IncludeRequest *bool        `toml:"include_request"`
}

type fileWebhook struct {
	URL    *string `toml:"url"`
	Secret *string `toml:"secret"`
}

type fileNtfy struct {
	URL   *string `toml:"url"`
	Topic *string `toml:"topic"`
}

// ntfyTopicRE: ntfy's own rule for a topic name.
var ntfyTopicRE = regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`)

// notifyTable reads [notify].
func (v *validator) notifyTable(fc *fileConfig, cfg *Config) {
	f := fc.Notify
	key := keyPath{"notify"}
	if f.Desktop != nil {
		cfg.Notify.Desktop = *f.Desktop
	}
	if f.IncludeRequest != nil {
		cfg.Notify.IncludeRequest = *f.IncludeRequest
	}
	if f.Command != nil {
		if len(f.Command) == 0 || f.Command[0] == "" {
			v.fail(key.child("command"), ruleErrf("empty command: want the program and its arguments, e.g. [\"/usr/local/bin/page-me\"] (no shell)"))
		} else {
			cfg.Notify.Command = f.Command
		}
	}
	if f.Webhook != nil {
		cfg.Notify.Webhook = v.webhook(key.child("webhook"), f.Webhook)
	}
	if f.Ntfy != nil {
		cfg.Notify.Ntfy = v.ntfy(key.child("ntfy"), f.Ntfy)
	}
}

func (v *validator) webhook(key keyPath, f *fileWebhook) *Webhook {
	w := &Webhook{}
	ok := true
	if f.URL == nil {
		v.fail(key.child("url"), ruleErrf("missing: the receiver's address, e.g. \"https://hooks.example.com/lazaret\""))
		ok = false
	} else if err := checkNotifyURL(*f.URL); err != nil {
		v.fail(key.child("url"), err)
		ok = false
	} else {
		w.URL = *f.URL
	}
	sk := key.child("secret")
	if f.Secret == nil {
		v.fail(sk, ruleErrf("missing: the signing key's source, \"env:VAR\" or \"file:PATH\" (a 0600 file)"))
		return nil
	}
	w.Secret = &Secret{Name: "notify.webhook", file: v.file, line: v.pos.lookup(key), srcKey: sk, srcLine: v.pos.lookup(sk)}
	if !v.notifySecret(sk, *f.Secret, w.Secret) || !ok {
		return nil
	}
	return w
}

// notifySecret reads the webhook secret's source. Unlike a secret's
// value, a refused one is never echoed: it may be the key itself.
func (v *validator) notifySecret(key keyPath, val string, s *Secret) bool {
	if name, ok := strings.CutPrefix(val, "env:"); ok && envNameRE.MatchString(name) {
		s.Env = name
		return true
	}
	if p, ok := strings.CutPrefix(val, "file:"); ok && p != "" && !strings.ContainsAny(p, "{}") {
		exp, err := expandString(p, func(string) string { return "" })
		if err == nil {
			exp, err = canonicalizeChecked(exp)
		}
		if err != nil {
			v.fail(key, err)
			return false
		}
		s.File = exp
		return true
	}
	v.fail(key, ruleErrf("want \"env:VAR\" (a host variable) or \"file:PATH\" (a 0600 file) holding the key; the key itself never goes in the configuration"))
	return false
}

func (v *validator) ntfy(key keyPath, f *fileNtfy) *Ntfy {
	n := &Ntfy{URL: "https://ntfy.sh"}
	ok := true
	if f.URL != nil {
		if err := checkNotifyURL(*f.URL); err != nil {
			v.fail(key.child("url"), err)
			ok = false
		} else {
			n.URL = *f.URL
		}
	}
	switch {
	case f.Topic == nil:
		v.fail(key.child("topic"), ruleErrf("missing: the topic to post to, e.g. \"lazaret-3f9c1e\" (anyone who knows it can read it: make it hard to guess)"))
		ok = false
	case !ntfyTopicRE.MatchString(*f.Topic):
		v.fail(key.child("topic"), ruleErrf("invalid topic %s: want 1-64 letters, digits, - or _", quoteValue(*f.Topic)))
		ok = false
	default:
		n.Topic = *f.Topic
	}
	if !ok {
		return nil
	}
	return n
}

// checkNotifyURL admits an https URL, or http to a loopback address (a
// local relay): events leave the machine only encrypted. Credentials in
// the URL are refused: the configuration is not a secret's place.
func checkNotifyURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return ruleErrf("invalid URL %s: want \"https://host/path\"", quoteValue(raw))
	}
	if u.User != nil {
		return ruleErrf("the URL must not carry a user or password (it would sit in the configuration)")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return ruleErrf("invalid URL %s: no query or fragment", quoteValue(raw))
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return ruleErrf("invalid URL %s: want https (http only to a loopback address)", quoteValue(raw))
	}
	return ruleErrf("invalid URL %s: want https", quoteValue(raw))
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
