package secretfetch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// TestFetch: values and fresh placeholders in order, the env: source
// removed from the environment; a profile without secrets gives nil.
func TestFetch(t *testing.T) {
	t.Setenv("LZT_SECRETFETCH", "v1")
	sec := &config.Secret{Name: "a", Hosts: []string{"api.a.test"}, Header: "x-api-key", Env: "LZT_SECRETFETCH"}
	p := &config.Profile{Secrets: []config.ProfileSecret{{Secret: sec, EnvVar: "A_KEY"}}}
	f, err := Fetch(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.List) != 1 || f.List[0].Value != "v1" || f.EnvVars[0] != "A_KEY" || f.Sources[0] != sec || f.List[0].Header != "x-api-key" {
		t.Fatalf("fetched %+v", f)
	}
	if ph := f.List[0].Placeholder; !strings.HasPrefix(ph, PlaceholderPrefix) || len(ph) != len(PlaceholderPrefix)+32 {
		t.Errorf("placeholder %q", ph)
	}
	if _, set := os.LookupEnv("LZT_SECRETFETCH"); set {
		t.Error("the source variable is still set")
	}
	if got := f.Hosts(); len(got) != 1 || got[0] != "api.a.test" {
		t.Errorf("hosts %q", got)
	}
	if f, err := Fetch(t.Context(), &config.Profile{}); f != nil || err != nil {
		t.Errorf("no secrets: %v, %v", f, err)
	}
}

// TestUpstreamRootsBadBundle: an unreadable ca_bundle is an error.
func TestUpstreamRootsBadBundle(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	if _, err := UpstreamRoots(&config.CABundle{Path: missing, Explicit: true}); err == nil {
		t.Fatal("a missing ca_bundle was accepted")
	}
}
