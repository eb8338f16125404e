package netd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

const podValue = "sk-THE-VALUE-abcdef0123456789"

func writePodSecrets(t *testing.T, ss []secret.Secret) (string, string) {
	t.Helper()
	cfg, sec := t.TempDir(), t.TempDir()
	b, _ := json.Marshal(ss)
	os.WriteFile(filepath.Join(cfg, netdapi.PodSecretsFile), b, 0o644)
	os.WriteFile(filepath.Join(cfg, netdapi.PodCACertFile), []byte("CERT"), 0o644)
	os.WriteFile(filepath.Join(cfg, netdapi.PodRootsFile), []byte("ROOTS"), 0o644)
	os.WriteFile(filepath.Join(sec, netdapi.PodCAKeyFile), []byte("KEY"), 0o400)
	os.WriteFile(filepath.Join(sec, "value.alpha"), []byte(podValue+"\n"), 0o400)
	return filepath.Join(cfg, netdapi.PodSecretsFile), sec
}

func TestLoadPodSecrets(t *testing.T) {
	ph := "lzph-0123456789abcdef0123456789abcdef"
	file, dir := writePodSecrets(t, []secret.Secret{{Name: "alpha", Hosts: []string{"api.example.com"}, Placeholder: ph}})
	req, err := LoadPodSecrets(file, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Secrets) != 1 || req.Secrets[0].Value != podValue || string(req.CAKey) != "KEY" || string(req.CACert) != "CERT" || string(req.Roots) != "ROOTS" {
		t.Fatalf("got %+v", req)
	}
	if req.Op != netdapi.OpSecrets || req.Version != netdapi.Version {
		t.Errorf("request %q v%d", req.Op, req.Version)
	}
}

// Bad input stops netd with an error naming the file, never a value.
func TestLoadPodSecretsRefuses(t *testing.T) {
	ph := "lzph-0123456789abcdef0123456789abcdef"
	for name, ss := range map[string][]secret.Secret{
		"value in the ConfigMap": {{Name: "alpha", Hosts: []string{"api.example.com"}, Placeholder: ph, Value: podValue}},
		"no value file":          {{Name: "beta", Hosts: []string{"api.example.com"}, Placeholder: ph}},
		"bad name":               {{Name: "../alpha", Hosts: []string{"api.example.com"}, Placeholder: ph}},
		"no hosts":               {{Name: "alpha", Placeholder: ph}},
	} {
		file, dir := writePodSecrets(t, ss)
		_, err := LoadPodSecrets(file, dir)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), podValue) {
			t.Errorf("%s: the error shows the value: %v", name, err)
		}
		if !strings.Contains(err.Error(), file) && !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: the error names no file: %v", name, err)
		}
	}
}

// FuzzLoadPodSecrets: any secrets file (a ConfigMap whoever may edit it
// writes) gives valid secrets or an error that never shows the value.
func FuzzLoadPodSecrets(f *testing.F) {
	for _, s := range []string{
		`[{"name":"alpha","hosts":["api.example.com"],"placeholder":"lzph-0123456789abcdef0123456789abcdef"}]`,
		`[{"name":"alpha","hosts":["*.com"],"placeholder":"lzph-0123456789abcdef0123456789abcdef","header":"x-api-key"}]`,
		`[]`, `{}`, `null`, `[{"name":"../x"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, dir := writePodSecrets(t, nil)
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		req, err := LoadPodSecrets(file, dir)
		if err != nil {
			if strings.Contains(err.Error(), podValue) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q", err)
			}
			return
		}
		for _, s := range req.Secrets {
			if err := s.Validate(); err != nil {
				t.Fatalf("accepted an invalid secret: %v", err)
			}
		}
	})
}
