package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const secretsDoc = `[network]
allow_domains = ["api.alpha.test", "*.beta.test"]

[secrets.alpha]
value = "env:LZT_ALPHA"
hosts = ["api.alpha.test"]
header = "Authorization"
format = "Bearer {value}"

[secrets.beta]
command = ["/bin/echo", "beta-value"]
refresh = "30m"
hosts = ["*.x.beta.test"]

[profiles.default]
secrets = { alpha = "ALPHA_KEY", beta = "BETA_KEY" }
`

func TestSecretsParse(t *testing.T) {
	testEnv(t)
	c := mustParse(t, secretsDoc)
	p := c.Profiles["default"]
	if len(p.Secrets) != 2 || p.Secrets[0].EnvVar != "ALPHA_KEY" || p.Secrets[1].Secret.Refresh.Minutes() != 30 {
		t.Fatalf("profile secrets %+v", p.Secrets)
	}
	t.Setenv("LZT_ALPHA", "alpha-value\n")
	if err := p.CheckEnv(); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("LZT_ALPHA")
	if err := p.CheckEnv(); err == nil || !strings.Contains(err.Error(), "test.toml:5: secrets.alpha.value: host variable LZT_ALPHA is not set") {
		t.Errorf("unset source: %v", err)
	}
}

func TestSecretsBadInput(t *testing.T) {
	testEnv(t)
	for _, c := range []struct{ doc, want string }{
		{`[secrets.a]
value = "env:X"
`, "test.toml:1: secrets.a.hosts: missing"},
		{`[secrets.a]
value = "sk-live-123"
hosts = ["a.test"]
`, "test.toml:2: secrets.a.value: invalid value"},
		{`[secrets.a]
value = "env:X"
hosts = ["*.com"]
`, "test.toml:3: secrets.a.hosts[0]"},
		{`[secrets.a]
value = "env:X"
hosts = ["a.test"]
[profiles.default]
allow_domains = ["b.test"]
secrets = { a = "A_KEY" }
`, `test.toml:6: profiles.default.secrets.a: host "a.test" of secret a is not in the profile's allow_domains`},
		{`[profiles.default]
allow_domains = ["b.test"]
secrets = { nope = "A_KEY" }
`, `test.toml:3: profiles.default.secrets.nope: unknown secret "nope"`},
		{`[secrets.a]
value = "env:X"
hosts = ["a.test"]
format = "Bearer {value}"
`, "test.toml:4: secrets.a.format: format needs header"},
		{`[secrets.a]
value = "env:X"
hosts = ["a.test"]
[profiles.default]
allow_domains = ["a.test"]
env = { A_KEY = "x" }
secrets = { a = "A_KEY" }
`, "profiles.default.secrets.a: A_KEY is also set in env"},
	} {
		_, err := parse(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n got %v\nwant %s", c.doc, err, c.want)
		}
	}
}

func TestSecretFileMode(t *testing.T) {
	root := testEnv(t)
	f := filepath.Join(root, "home", "key")
	if err := os.WriteFile(f, []byte("file-value\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, `[network]
allow_domains = ["a.test"]
[secrets.a]
value = "file:~/key"
hosts = ["a.test"]
[profiles.default]
secrets = { a = "A_KEY" }
`)
	p := c.Profiles["default"]
	if err := p.CheckEnv(); err == nil || !strings.Contains(err.Error(), "mode 0600") {
		t.Errorf("0644 file: %v", err)
	}
	os.Chmod(f, 0o600)
	if err := p.CheckEnv(); err != nil {
		t.Errorf("0600 file: %v", err)
	}
}
