package sidecar

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi/netdtest"
)

// TestPrepareSecrets: the agent's spec gets placeholders (never the
// value), the trust store with the sandbox CA, and the CA variables
// pointed at it; an env: source leaves the process environment.
func TestPrepareSecrets(t *testing.T) {
	t.Setenv("LZT_SIDECAR_SECRET", "the-real-value")
	a := testAnchor(t)
	sec := &config.Secret{Name: "alpha", Hosts: []string{"api.alpha.test"}, Env: "LZT_SIDECAR_SECRET"}
	prof := &config.Profile{Name: "default", Secrets: []config.ProfileSecret{{Secret: sec, EnvVar: "ALPHA_KEY"}}}
	s, err := FetchSecrets(t.Context(), prof)
	if err != nil {
		t.Fatal(err)
	}
	if _, set := os.LookupEnv("LZT_SIDECAR_SECRET"); set {
		t.Error("the source variable is still in the environment")
	}
	bundle := filepath.Join(t.TempDir(), "roots.pem")
	ca, err := secret.NewCA([]string{"roots.test"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bundle, ca.CertPEM, 0o644)
	c := New(Options{Anchor: a, Podman: &podman.Client{}, CABundle: config.CABundle{Path: bundle, Explicit: true}}).WithSecrets(s)
	spec := &podman.ContainerSpec{Env: map[string]string{"SSL_CERT_FILE": sandbox.CABundlePath, "REQUESTS_CA_BUNDLE": "/mine.pem"}}
	if err := c.prepareSecrets(spec, &c.o.CABundle); err != nil {
		t.Fatal(err)
	}
	if ph := spec.Env["ALPHA_KEY"]; !strings.HasPrefix(ph, PlaceholderPrefix) || len(ph) != len(PlaceholderPrefix)+32 {
		t.Errorf("placeholder %q", ph)
	}
	if spec.Env["SSL_CERT_FILE"] != InjectBundlePath || spec.Env["NODE_EXTRA_CA_CERTS"] != InjectBundlePath || spec.Env["REQUESTS_CA_BUNDLE"] != "/mine.pem" {
		t.Errorf("CA variables %v", spec.Env)
	}
	for _, v := range spec.Env {
		if strings.Contains(v, "the-real-value") {
			t.Error("the value is in the agent's spec")
		}
	}
	m := spec.Mounts[len(spec.Mounts)-1]
	data, err := os.ReadFile(m.Source)
	if err != nil || m.Target != InjectBundlePath || !m.ReadOnly {
		t.Fatalf("mount %+v: %v", m, err)
	}
	if !strings.Contains(string(data), string(c.ca.CertPEM)) || !strings.Contains(string(data), string(ca.CertPEM)) {
		t.Error("the trust store lacks the sandbox CA or the profile's roots")
	}
}

// TestRefreshLoop: a command source with refresh is run again and netd
// gets each new value.
func TestRefreshLoop(t *testing.T) {
	f, cl := netdtest.Serve(t, "")
	src := &config.Secret{Name: "tok", Command: []string{"/bin/sh", "-c", "echo tok-$(date +%s%N)"}, Refresh: 20 * time.Millisecond}
	c := &Component{o: Options{Log: slog.New(slog.DiscardHandler)}, closing: make(chan struct{}),
		secrets: &Secrets{list: []secret.Secret{{Name: "tok"}}, sources: []*config.Secret{src}}}
	go c.refreshLoop(cl)
	deadline := time.Now().Add(10 * time.Second)
	for {
		reqs := f.Requests()
		n := len(reqs)
		var vals []string
		for _, r := range reqs {
			vals = append(vals, r.Value)
			if r.Op != netdapi.OpSecretValue || r.Target != "tok" || !strings.HasPrefix(r.Value, "tok-") {
				t.Errorf("request %+v", r)
			}
		}
		if n >= 2 && vals[0] != vals[1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d refreshes", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(c.closing)
}

// TestSecretNotice: a refused placeholder's notice names the secret and
// the host, escaped (the host is the agent's choice).
func TestSecretNotice(t *testing.T) {
	line := Notice("default", netdapi.DenialEvent{Secret: "alpha", Name: "ev\x1b[31mil.test"})
	if !strings.HasPrefix(line, `lazaret: secrets: the placeholder of secret "alpha" was sent to "ev`) || strings.ContainsRune(line, 0x1b) {
		t.Errorf("notice %q", line)
	}
}
