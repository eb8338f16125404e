package secretfetch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// load parses doc as a configuration file of its own (errors then name
// config.toml and a line).
func load(t *testing.T, doc string) *config.Profile {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	f := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return c.Profiles["default"]
}

const sourcesDoc = `[network]
allow_domains = ["a.test"]
[secrets.env]
value = "env:LZT_SECRET_ENV"
hosts = ["a.test"]
[secrets.cmd]
command = ["/bin/echo", "cmd-value"]
hosts = ["a.test"]
[secrets.file]
value = "file:~/key"
hosts = ["a.test"]
[secrets.fails]
command = ["/bin/sh", "-c", "echo token expired >&2; exit 3"]
hosts = ["a.test"]
[profiles.default]
secrets = { env = "ENV_KEY", cmd = "CMD_KEY", file = "FILE_KEY", fails = "FAILS_KEY" }
`

func TestValue(t *testing.T) {
	p := load(t, sourcesDoc)
	t.Setenv("LZT_SECRET_ENV", "env-value\n")
	key := filepath.Join(os.Getenv("HOME"), "key")
	if err := os.WriteFile(key, []byte("file-value\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	by := map[string]*config.Secret{}
	for _, ps := range p.Secrets {
		by[ps.Secret.Name] = ps.Secret
	}
	for name, want := range map[string]string{"env": "env-value", "cmd": "cmd-value"} {
		if v, err := Value(context.Background(), by[name]); err != nil || v != want {
			t.Errorf("%s: %q %v", name, v, err)
		}
	}
	if _, err := Value(context.Background(), by["file"]); err == nil || !strings.Contains(err.Error(), "mode 0600") {
		t.Errorf("0644 file: %v", err)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := Value(context.Background(), by["file"]); err != nil || v != "file-value" {
		t.Errorf("0600 file: %q %v", v, err)
	}
	_, err := Value(context.Background(), by["fails"])
	if err == nil || !strings.Contains(err.Error(), "config.toml:13: secrets.fails.command:") || !strings.Contains(err.Error(), "token expired") {
		t.Errorf("failing command: %v", err)
	}
}

func TestTakeSources(t *testing.T) {
	p := load(t, sourcesDoc)
	t.Setenv("LZT_SECRET_ENV", "v")
	got := TakeSources(p)
	if len(got) != 1 || got[0] != "LZT_SECRET_ENV=v" {
		t.Errorf("taken: %v", got)
	}
	if _, ok := os.LookupEnv("LZT_SECRET_ENV"); ok {
		t.Error("the variable is still in the environment")
	}
}
