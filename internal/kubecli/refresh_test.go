package kubecli

import (
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube/kubetest"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/engine/secretfetch"
)

// TestSecretRefreshWritesTheSecret: while a session runs, a command
// secret with a refresh period is fetched again and its new value
// replaces the old one in the sandbox's Secret, the CA key beside it
// untouched; without a period nothing refreshes (the control).
func TestSecretRefreshWritesTheSecret(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "sidecar-secret"},
		Data:       map[string][]byte{"value.alpha": []byte("old-value"), "ca.key": []byte("k")},
	}
	cl := kubetest.New("agents", s.DeepCopy())
	f := &secretfetch.Fetched{
		List:    []secret.Secret{{Name: "alpha", Hosts: []string{"api.alpha.test"}, Value: "old-value"}},
		EnvVars: []string{"ALPHA_KEY"},
		Sources: []*config.Secret{{Name: "alpha", Command: []string{"/bin/echo", "new-value"}}},
	}
	if r := newSecretRefresh(cl.Client, s, f); r != nil {
		t.Fatal("a refresh without a period")
	}
	f.Sources[0].Refresh = 20 * time.Millisecond
	r := newSecretRefresh(cl.Client, s, f)
	g := &globals{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	stop := r.run(g)
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := cl.Client.SecretData(t.Context(), "sidecar-secret")
		if err != nil {
			t.Fatal(err)
		}
		if string(data["value.alpha"]) == "new-value" {
			if string(data["ca.key"]) != "k" {
				t.Errorf("the CA key changed: %q", data["ca.key"])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Secret still holds %q", data["value.alpha"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
