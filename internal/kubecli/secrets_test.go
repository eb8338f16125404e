package kubecli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/netdpod"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
)

const kubeSecretValue = "kube-secret-value-5d1e"

// secretsEnv is a fake cluster whose profile dev injects secret alpha
// (read from LZT_KUBE_SECRET) as header format, with ca_bundle a test
// root.
func secretsEnv(t *testing.T, format string) *env {
	t.Helper()
	ca, err := secret.NewCA([]string{"roots.test"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, plainCfg+"[network]\nallow_domains = [\"api.alpha.test\"]\n"+
		"[secrets.alpha]\nvalue = \"env:LZT_KUBE_SECRET\"\nhosts = [\"api.alpha.test\"]\nheader = \"Authorization\"\nformat = \""+format+"\"\n"+
		"[profiles.dev]\nimage = \"agent:1\"\nca_bundle = \""+roots+"\"\nsecrets = { alpha = \"ALPHA_KEY\" }\npersistent_dirs = []\n")
	e.record(enforced)
	e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
	return e
}

// start runs exec with the secret's value set to value.
func (e *env) startWith(value string) {
	e.t.Helper()
	e.t.Setenv("LZT_KUBE_SECRET", value)
	if code := e.run("exec", "dev", "--", "true"); code != 0 {
		e.t.Fatalf("exit %d: %s", code, e.errOut.String())
	}
}

// only returns the one template of the cluster.
func (e *env) template() *kubespec.SandboxTemplate {
	e.t.Helper()
	ts, err := e.cluster.Client.Templates(context.Background(), "")
	if err != nil || len(ts) != 1 {
		e.t.Fatalf("templates %d, %v", len(ts), err)
	}
	return &ts[0]
}

// objectsJSON is every object of the namespace as JSON, by kind/name.
func (e *env) objectsJSON() map[string]string {
	e.t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	add := func(kind, name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			e.t.Fatal(err)
		}
		out[kind+"/"+name] = string(b)
	}
	for _, gvr := range []struct {
		kind string
		list func() ([]any, error)
	}{
		{"template", func() ([]any, error) { l, err := e.cluster.Client.Templates(ctx, ""); return anys(l), err }},
		{"warmpool", func() ([]any, error) { l, err := e.cluster.Client.WarmPools(ctx, ""); return anys(l), err }},
		{"claim", func() ([]any, error) { l, err := e.cluster.Client.Claims(ctx, ""); return anys(l), err }},
	} {
		l, err := gvr.list()
		if err != nil {
			e.t.Fatal(err)
		}
		for i, o := range l {
			add(gvr.kind, strings.Repeat("#", i+1), o)
		}
	}
	cms, err := e.cluster.Core.CoreV1().ConfigMaps("agents").List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, cm := range cms.Items {
		add("configmap", cm.Name, cm)
	}
	secs, err := e.cluster.Core.CoreV1().Secrets("agents").List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range secs.Items {
		add("secret", s.Name, s)
	}
	return out
}

func anys[T any](l []T) []any {
	out := make([]any, len(l))
	for i := range l {
		out[i] = l[i]
	}
	return out
}

// holding are the objects whose JSON holds value (plain or base64).
func holding(objs map[string]string, value string) []string {
	var out []string
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	for k, v := range objs {
		if strings.Contains(v, value) || strings.Contains(v, b64) {
			out = append(out, k)
		}
	}
	return out
}

// TestClusterSecretsOnlyInTheSecret: after a start, the value is in the
// Secret beside the sidecar's ConfigMap and nowhere else (template, warm
// pool, claim, ConfigMap, agent env: the same search finds it in the
// Secret), only netd's container mounts that Secret, and the agent sees
// the placeholder and the CA bundle.
func TestClusterSecretsOnlyInTheSecret(t *testing.T) {
	e := secretsEnv(t, "Bearer {value}")
	e.startWith(kubeSecretValue)
	pod := e.template().Spec.PodTemplate.Spec
	var cmName string
	for _, v := range pod.Volumes {
		if v.Name == netdpod.ConfigVolume {
			cmName = v.ConfigMap.Name
		}
	}
	want := "secret/" + netdpod.SecretName(cmName)
	if got := holding(e.objectsJSON(), kubeSecretValue); len(got) != 1 || got[0] != want {
		t.Fatalf("the value is in %q, want only in %s", got, want)
	}
	data, err := e.cluster.Client.SecretData(context.Background(), netdpod.SecretName(cmName))
	if err != nil || len(data) != 2 {
		t.Fatalf("secret data keys %d, %v", len(data), err)
	}
	mounts := map[string]bool{}
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == netdpod.SecretVolume {
				mounts[c.Name] = true
			}
		}
	}
	if len(mounts) != 1 || !mounts[netdpod.ContainerName] {
		t.Errorf("the Secret is mounted into %v, want netd only", mounts)
	}
	agentEnv := map[string]string{}
	for _, v := range pod.Containers[0].Env {
		agentEnv[v.Name] = v.Value
	}
	if ph := agentEnv["ALPHA_KEY"]; !validPlaceholder(ph) || !strings.HasPrefix(agentEnv["SSL_CERT_FILE"], netdpod.AgentCADir) {
		t.Errorf("agent env %v", agentEnv)
	}
	cm, err := e.cluster.Client.ConfigMap(context.Background(), cmName)
	if err != nil || !strings.Contains(cm["secrets.json"], agentEnv["ALPHA_KEY"]) {
		t.Errorf("the ConfigMap lacks the placeholder: %v", err)
	}
}

// TestClusterSecretsStableTemplate: a second start with the same
// configuration reuses the placeholder and CA (the same template, no new
// ConfigMap) and a new value only updates the Secret; a changed secret
// configuration rotates them (a new template, ConfigMap and placeholder).
func TestClusterSecretsStableTemplate(t *testing.T) {
	e := secretsEnv(t, "Bearer {value}")
	e.startWith(kubeSecretValue)
	first := e.template()
	e.startWith(kubeSecretValue + "-refreshed")
	objs := e.objectsJSON()
	if second := e.template(); second.Name != first.Name {
		t.Fatalf("template %s became %s on a second start", first.Name, second.Name)
	}
	if got := holding(objs, kubeSecretValue+"-refreshed"); len(got) != 1 || !strings.HasPrefix(got[0], "secret/") {
		t.Errorf("the refreshed value is in %q", got)
	}
	if got := holding(objs, kubeSecretValue); len(got) != 0 {
		t.Errorf("the old value is still in %q", got)
	}
	ph := placeholderOf(t, first)

	// A changed format: a new configuration, new placeholder and CA.
	e2 := secretsEnv(t, "Token {value}")
	e2.cluster = e.cluster
	e2.startWith(kubeSecretValue)
	ts, err := e.cluster.Client.Templates(context.Background(), "")
	if err != nil || len(ts) != 2 {
		t.Fatalf("templates after a config change %d, %v", len(ts), err)
	}
	for _, tpl := range ts {
		if tpl.Name != first.Name && placeholderOf(t, &tpl) == ph {
			t.Errorf("the placeholder was not rotated")
		}
	}
}

func placeholderOf(t *testing.T, tpl *kubespec.SandboxTemplate) string {
	t.Helper()
	for _, v := range tpl.Spec.PodTemplate.Spec.Containers[0].Env {
		if v.Name == "ALPHA_KEY" {
			return v.Value
		}
	}
	t.Fatal("no placeholder in the template")
	return ""
}

// TestClusterSecretsFailingSource: a source that fails is one error
// naming the file and key, and nothing is created.
func TestClusterSecretsFailingSource(t *testing.T) {
	e := secretsEnv(t, "Bearer {value}")
	os.Unsetenv("LZT_KUBE_SECRET")
	code := e.run("exec", "dev", "--", "true")
	if code == 0 || !strings.Contains(e.errOut.String(), e.cfgFile) || !strings.Contains(e.errOut.String(), "secrets.alpha") {
		t.Fatalf("exit %d: %s", code, e.errOut.String())
	}
	for k := range e.objectsJSON() {
		if k != "configmap/"+kubespec.ProbeRecord {
			t.Errorf("%s was created", k)
		}
	}
}

// TestClusterSecretsPurgeRotates: stop --purge deletes the unused
// template's ConfigMap and Secret (the value and CA key leave the
// cluster), and the next start makes a new placeholder.
func TestClusterSecretsPurgeRotates(t *testing.T) {
	e := secretsEnv(t, "Bearer {value}")
	e.startWith(kubeSecretValue)
	ph := placeholderOf(t, e.template())
	if code := e.run("stop", "--purge", "dev"); code != 0 {
		t.Fatalf("stop --purge: %d %s", code, e.errOut.String())
	}
	if got := holding(e.objectsJSON(), kubeSecretValue); len(got) != 0 {
		t.Fatalf("after purge the value is still in %q", got)
	}
	e.startWith(kubeSecretValue)
	if placeholderOf(t, e.template()) == ph {
		t.Error("the placeholder survived a purge")
	}
}
