package kubecli

import (
	"context"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/secretfetch"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// secretRefresh keeps a cluster sandbox's command secrets fresh while a
// session of this process runs: each source with a refresh period runs
// again every period and its new value replaces the old one in the
// sandbox's Secret, which netd in the pod re-reads (netd --pod watches
// its mounted Secret). No process of lazaret's stays on the host between
// sessions: a sandbox nobody is attached to keeps the last value.
type secretRefresh struct {
	c       *kube.Client
	fetched *secretfetch.Fetched

	mu     sync.Mutex
	secret *corev1.Secret // the last data written, updated in place
}

// newSecretRefresh is nil when no secret of f has a refresh period.
func newSecretRefresh(c *kube.Client, s *corev1.Secret, f *secretfetch.Fetched) *secretRefresh {
	if s == nil || f == nil {
		return nil
	}
	for _, src := range f.Sources {
		if src.Refresh > 0 {
			return &secretRefresh{c: c, fetched: f, secret: s.DeepCopy()}
		}
	}
	return nil
}

// run refreshes until the returned function is called, which waits for
// the loops to stop. A nil r does nothing.
func (r *secretRefresh) run(g *globals) (stop func()) {
	if r == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		secretfetch.Refresh(ctx, r.fetched.Sources, r.set, func(name string, err error) {
			g.log.Error("refreshing a secret; the sandbox keeps its previous value", "secret", name, "err", err)
		})
	}()
	return func() { cancel(); <-done }
}

// set writes the new value of the i-th secret into the Secret.
func (r *secretRefresh) set(ctx context.Context, i int, value string) error {
	key, err := netdapi.PodSecretValueFile(r.fetched.List[i].Name)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.secret.DeepCopy()
	next.Data = maps.Clone(next.Data)
	next.Data[key] = []byte(value)
	if err := r.c.ApplySecret(ctx, next); err != nil {
		return err
	}
	r.secret = next
	return nil
}
