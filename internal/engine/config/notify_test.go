package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tomlQuote is a TOML basic string of s (strconv.Quote's \v and \x are
// not TOML).
func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' {
			fmt.Fprintf(&b, "\\u%04X", r)
			continue
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

const notifyDoc = `[notify]
desktop = true
include_request = true
command = ["/usr/local/bin/page-me", "--quiet"]
webhook = { url = "https://hooks.example.com/lazaret", secret = "env:LZT_HOOK" }
ntfy = { topic = "lazaret-3f9c1e" }
`

func TestNotifyParse(t *testing.T) {
	testEnv(t)
	n := mustParse(t, notifyDoc).Notify
	if !n.Desktop || !n.IncludeRequest || !n.Any() || len(n.Command) != 2 {
		t.Fatalf("notify %+v", n)
	}
	if n.Webhook == nil || n.Webhook.URL != "https://hooks.example.com/lazaret" || n.Webhook.Secret.Env != "LZT_HOOK" {
		t.Fatalf("webhook %+v", n.Webhook)
	}
	if n.Ntfy == nil || n.Ntfy.Endpoint() != "https://ntfy.sh/lazaret-3f9c1e" {
		t.Fatalf("ntfy %+v", n.Ntfy)
	}
	if mustParse(t, "").Notify.Any() {
		t.Error("no [notify]: a notifier is configured")
	}
	// The secret's source is checked where it is used (doctor, the
	// coordinator), located at its key.
	os.Unsetenv("LZT_HOOK")
	if err := n.Webhook.CheckSecret(); err == nil || !strings.Contains(err.Error(), "test.toml:5: notify.webhook.secret: host variable LZT_HOOK is not set") {
		t.Errorf("unset variable: %v", err)
	}
	t.Setenv("LZT_HOOK", "k")
	if err := n.Webhook.CheckSecret(); err != nil {
		t.Error(err)
	}
}

func TestNotifySecretFile(t *testing.T) {
	root := testEnv(t)
	f := filepath.Join(root, "home", "hook.key")
	if err := os.WriteFile(f, []byte("k\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := mustParse(t, "[notify]\nwebhook = { url = \"http://127.0.0.1:9/x\", secret = \"file:~/hook.key\" }\n").Notify.Webhook
	if w == nil || w.Secret.File != f {
		t.Fatalf("webhook %+v", w)
	}
	if err := w.CheckSecret(); err == nil || !strings.Contains(err.Error(), "mode 0600") {
		t.Errorf("0644 file: %v", err)
	}
	if err := os.Chmod(f, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.CheckSecret(); err != nil {
		t.Errorf("0600 file: %v", err)
	}
}

func TestNotifyBadInput(t *testing.T) {
	testEnv(t)
	for _, c := range []struct{ doc, want string }{
		{"[notify]\ncommand = []\n", "test.toml:2: notify.command: empty command"},
		{"[notify]\ncommand = [\"\"]\n", "test.toml:2: notify.command: empty command"},
		{"[notify]\nwebhook = { url = \"http://hooks.example.com/\", secret = \"env:K\" }\n", "notify.webhook.url: invalid URL \"http://hooks.example.com/\": want https (http only to a loopback address)"},
		{"[notify]\nwebhook = { url = \"ftp://x.test/\", secret = \"env:K\" }\n", "notify.webhook.url: invalid URL"},
		{"[notify]\nwebhook = { url = \"https://u:p@x.test/\", secret = \"env:K\" }\n", "notify.webhook.url: the URL must not carry a user or password"},
		{"[notify]\nwebhook = { url = \"https:///x\", secret = \"env:K\" }\n", "notify.webhook.url: invalid URL"},
		{"[notify]\nwebhook = { url = \"https://x.test/\" }\n", "notify.webhook.secret: missing"},
		{"[notify]\nwebhook = { secret = \"env:K\" }\n", "notify.webhook.url: missing"},
		{"[notify]\nwebhook = { url = \"https://x.test/\", secret = \"s3cr3t-literal\" }\n", "notify.webhook.secret: want \"env:VAR\""},
		{"[notify]\nwebhook = { url = \"https://x.test/\", secret = \"env:K\", sekret = 1 }\n", "notify.webhook.sekret: unknown key"},
		{"[notify]\nntfy = { url = \"https://ntfy.example\" }\n", "notify.ntfy.topic: missing"},
		{"[notify]\nntfy = { topic = \"a/b\" }\n", "notify.ntfy.topic: invalid topic"},
		{"[notify]\nntfy = { topic = \"t\", url = \"http://ntfy.sh\" }\n", "notify.ntfy.url: invalid URL"},
		{"[notify]\ndesktop = \"yes\"\n", "notify.desktop"},
		{"[notify]\ndesk = true\n", "notify.desk: unknown key"},
	} {
		_, err := parse(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n got %v\nwant %s", c.doc, err, c.want)
		}
	}
}

// TestNotifySecretNotEchoed: a key written literally is refused without
// being shown (the error goes to terminals and the coordinator log).
// Control: a refused URL is shown, so the check would see an echo.
func TestNotifySecretNotEchoed(t *testing.T) {
	testEnv(t)
	_, err := parse(t, "[notify]\nwebhook = { url = \"https://x.test/\", secret = \"whsec_DEADBEEF\" }\n")
	if err == nil || strings.Contains(err.Error(), "DEADBEEF") {
		t.Errorf("literal secret: %v", err)
	}
	_, err = parse(t, "[notify]\nwebhook = { url = \"gopher://DEADBEEF/\", secret = \"env:K\" }\n")
	if err == nil || !strings.Contains(err.Error(), "DEADBEEF") {
		t.Errorf("control: the refused URL is not shown: %v", err)
	}
}

// FuzzNotify: any url, topic, secret and command give a configuration
// or one-line errors at their keys, never a non-https remote URL.
func FuzzNotify(f *testing.F) {
	root := f.TempDir()
	f.Setenv("HOME", filepath.Join(root, "home"))
	f.Setenv("XDG_DATA_HOME", filepath.Join(root, "data"))
	f.Setenv("XDG_RUNTIME_DIR", filepath.Join(root, "run"))
	f.Add("https://x.test/a", "topic", "env:K", "/bin/true")
	f.Add("http://[::1]:8/", "a/b", "file:~/k", "")
	f.Add("http://127.0.0.1.evil.test/", "", "file:{x}", "x")
	f.Add("https://u@x/%zz", "t\n", "s3cr3t", "\x00")
	f.Fuzz(func(t *testing.T, u, topic, secret, cmd string) {
		doc := "[notify]\ncommand = [" + tomlQuote(cmd) + "]\nwebhook = { url = " + tomlQuote(u) + ", secret = " + tomlQuote(secret) +
			" }\nntfy = { url = " + tomlQuote(u) + ", topic = " + tomlQuote(topic) + " }\n"
		c, err := Parse("fuzz.toml", []byte(doc))
		if err != nil {
			for _, e := range Errors(err) {
				if strings.ContainsFunc(e.Error(), isControl) || !strings.HasPrefix(e.Key, "notify.") {
					t.Fatalf("error %q", e.Error())
				}
			}
			return
		}
		w := c.Notify.Webhook
		if w == nil || c.Notify.Ntfy == nil || !(strings.HasPrefix(w.URL, "https://") || strings.HasPrefix(w.URL, "http://")) {
			t.Fatalf("accepted without a webhook or ntfy: %+v", c.Notify)
		}
		if err := checkNotifyURL(w.URL); err != nil {
			t.Fatalf("accepted %q: %v", w.URL, err)
		}
	})
}
