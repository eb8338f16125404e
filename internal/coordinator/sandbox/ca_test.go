package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

const caPEM = "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"

func TestCABundleMountedWithEnv(t *testing.T) {
	p, a := specFixture(t)
	dir := t.TempDir()
	a.RuntimeDir = dir
	host := filepath.Join(dir, "host.pem")
	if err := os.WriteFile(host, []byte("comment\n"+caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	p.CABundle = config.CABundle{Path: host}
	p.Env["CURL_CA_BUNDLE"] = "/mine.pem"
	spec, err := NewSpec(p, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := runArgs(t, spec)
	snap := filepath.Join(dir, "ca-"+a.Hash+".crt")
	if want := "--mount type=bind,source=" + snap + ",destination=" + CABundlePath + ",readonly=true"; !strings.Contains(got, want) {
		t.Errorf("missing %q in\n%s", want, got)
	}
	data, err := os.ReadFile(snap)
	if err != nil || string(data) != caPEM {
		t.Errorf("snapshot = %q, %v; want the certificates only", data, err)
	}
	if fi, err := os.Stat(snap); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("snapshot mode: %v %v", fi, err)
	}
	for _, k := range CAEnv {
		want := CABundlePath
		if k == "CURL_CA_BUNDLE" {
			want = "/mine.pem"
		}
		if spec.Env[k] != want {
			t.Errorf("%s = %q, want %q", k, spec.Env[k], want)
		}
	}
}

func TestCABundleMissing(t *testing.T) {
	p, a := specFixture(t)
	a.RuntimeDir = t.TempDir()
	// The host's default bundle is optional: without it the image's own
	// trust store applies and nothing is mounted.
	p.CABundle = config.CABundle{Path: filepath.Join(a.RuntimeDir, "none.pem")}
	spec, err := NewSpec(p, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if HasMount(spec, CABundlePath) || spec.Env["SSL_CERT_FILE"] != "" {
		t.Errorf("default bundle missing, yet mounted: %v", spec.Mounts)
	}
	// A configured one is required, and the error names its key.
	p.CABundle = config.CABundle{Path: filepath.Join(a.RuntimeDir, "none.pem"), Explicit: true, File: "c.toml", Line: 7, Key: "profiles.claude.ca_bundle"}
	_, err = NewSpec(p, a, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "c.toml:7: profiles.claude.ca_bundle: ") {
		t.Errorf("err = %v", err)
	}
}
