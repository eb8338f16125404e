package netdpod

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\n%s", name, got)
	}
}

func testPolicy(t *testing.T) netpolicy.Policy {
	p, err := netpolicy.FromConfig(
		[]netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("169.0.0.0/8"), netip.MustParsePrefix("169.254.169.254/32"), netip.MustParsePrefix("2001:db8:1::/48")},
		[]string{"registry.npmjs.org", "*.githubusercontent.com"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var upstreams = []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:53")}

// Values that must never appear outside SecretData.
const (
	secretValue = "sk-ant-THE-REAL-VALUE-0123456789"
	caKeyText   = "CA-PRIVATE-KEY-DER-BYTES"
)

func secretOptions(t *testing.T) Options {
	return Options{
		Image: "localhost/lazaret-netd:test", PullPolicy: corev1.PullNever,
		Policy: testPolicy(t), Upstreams: upstreams, Name: "lazaret-net-abc",
		Secrets: []secret.Secret{{
			Name: "anthropic", Hosts: []string{"api.anthropic.com"}, Header: "x-api-key",
			Placeholder: "lzph-0123456789abcdef0123456789abcdef", Value: secretValue,
		}},
		SecretEnv: map[string]string{"anthropic": "ANTHROPIC_API_KEY"},
		CACert:    []byte("-----BEGIN CERTIFICATE-----\nTESTCA\n-----END CERTIFICATE-----\n"),
		CAKey:     []byte(caKeyText),
		Roots:     []byte("-----BEGIN CERTIFICATE-----\nTESTROOT\n-----END CERTIFICATE-----\n"),
	}
}

func TestSidecarGolden(t *testing.T) {
	s, err := Sidecar(Options{Image: "localhost/lazaret-netd:test", PullPolicy: corev1.PullNever, Policy: testPolicy(t), Upstreams: upstreams, Name: "lazaret-net-abc"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sidecar.golden.json", s)
	s, err = Sidecar(secretOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sidecar-secrets.golden.json", s)
}

// TestSecuritySpecPinned pins netd's securityContext: a change must be a
// deliberate edit of this test.
func TestSecuritySpecPinned(t *testing.T) {
	s, err := Sidecar(secretOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	f, tr, zero := false, true, int64(0)
	want := &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
		Privileged:               &f,
		AllowPrivilegeEscalation: &f,
		ReadOnlyRootFilesystem:   &tr,
		RunAsUser:                &zero,
		RunAsGroup:               &zero,
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if !reflect.DeepEqual(s.Container.SecurityContext, want) {
		t.Errorf("securityContext = %+v", s.Container.SecurityContext)
	}
	if s.Container.RestartPolicy == nil || *s.Container.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("not a native sidecar (restartPolicy Always)")
	}
	if s.Container.ReadinessProbe == nil || s.Container.ReadinessProbe.Exec == nil {
		t.Error("no readiness probe")
	}
	// The run and secret volumes are netd's alone.
	for _, m := range s.AgentVolumeMounts {
		if m.Name == RunVolume || m.Name == SecretVolume || m.Name == ConfigVolume {
			t.Errorf("agent mounts %s", m.Name)
		}
	}
}

// TestAgentFacingPartsHoldNoSecret searches everything but SecretData
// (the ConfigMap, the agent's mounts and environment, netd's container,
// the volumes, the DNS settings) for the value and the CA key, raw and
// base64. Control: the same search finds both in SecretData.
func TestAgentFacingPartsHoldNoSecret(t *testing.T) {
	s, err := Sidecar(secretOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	needles := []string{secretValue, caKeyText, base64.StdEncoding.EncodeToString([]byte(secretValue)), base64.StdEncoding.EncodeToString([]byte(caKeyText))}
	find := func(v any) []string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var hits []string
		for _, n := range needles {
			if strings.Contains(string(b), n) {
				hits = append(hits, n)
			}
		}
		return hits
	}
	for name, part := range map[string]any{
		"ConfigMapData": s.ConfigMapData, "AgentEnv": s.AgentEnv, "AgentVolumeMounts": s.AgentVolumeMounts,
		"Container": s.Container, "Volumes": s.Volumes, "DNSConfig": s.DNSConfig,
	} {
		if hits := find(part); len(hits) > 0 {
			t.Errorf("%s holds secret material %v", name, hits)
		}
	}
	if hits := find(s.SecretData); len(hits) != 2 {
		t.Errorf("control: SecretData should hold the value and the key (base64 in JSON), found %v", hits)
	}
	var env []string
	for _, e := range s.AgentEnv {
		env = append(env, e.Name+"="+e.Value)
	}
	if !strings.Contains(strings.Join(env, " "), "ANTHROPIC_API_KEY=lzph-0123456789abcdef0123456789abcdef") {
		t.Errorf("agent env lacks the placeholder: %v", env)
	}
}

func TestSidecarRefuses(t *testing.T) {
	base := secretOptions(t)
	for name, mut := range map[string]func(*Options){
		"no image":    func(o *Options) { o.Image = "" },
		"no upstream": func(o *Options) { o.Upstreams = nil },
		"no env":      func(o *Options) { o.SecretEnv = nil },
		"no CA key":   func(o *Options) { o.CAKey = nil },
		"bad name": func(o *Options) {
			o.Secrets = []secret.Secret{{Name: "a/b", Hosts: []string{"x.example"}, Placeholder: strings.Repeat("p", 20), Value: "v"}}
		},
		"invalid policy": func(o *Options) { o.Policy.AllowDomains = []netpolicy.Domain{{Pattern: "*"}} },
	} {
		o := base
		mut(&o)
		if _, err := Sidecar(o); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), secretValue) {
			t.Errorf("%s: error shows the value", name)
		}
	}
}
