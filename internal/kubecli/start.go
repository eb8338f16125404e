package kubecli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/engine/secretfetch"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// startOptions are the flags of the verbs that start a sandbox, and the
// profile's secrets fetched on the host (nil: none).
type startOptions struct {
	allowUnenforced bool
	timeout         time.Duration
	secrets         *secretfetch.Fetched
}

// running is a claim whose sandbox is Ready, and its pod.
type running struct {
	claim   string
	sandbox string
	pod     string
	// refresh keeps its command secrets fresh while a session runs
	// (nil: none has a refresh period).
	refresh *secretRefresh
}

// profileObjects are the shared objects of t's profile, with sidecar as
// its network sidecar (nil: none), secrets its secrets (nil: none) and
// lim its agent container's resources.
func profileObjects(cfg *config.Config, t *target, sidecar kubespec.SidecarFunc, secrets *podSecrets, lim podLimits) (*kubespec.Objects, netpolicy.Policy, error) {
	p := t.profile
	// The same policy the local network sidecar enforces.
	pol, err := netpolicy.FromConfig(p.AllowEgress, p.AllowDomains)
	if err != nil {
		return nil, pol, err
	}
	env := map[string]string{}
	for k, v := range p.Env {
		if !slices.Contains(p.EnvFromHost, k) {
			env[k] = v
		}
	}
	in := kubespec.Input{
		Profile: p.Name, Image: p.Image, ImagePullPolicy: cfg.Cluster.ImagePullPolicy,
		RuntimeClass: cfg.Cluster.RuntimeClass, Env: env, Policy: pol, Sidecar: sidecar,
		SidecarIdentity: secrets.identity(), State: stateSpec(cfg, t),
	}
	lim.apply(&in)
	objs, err := kubespec.Template(in)
	return objs, pol, err
}

// podLimits are p's pod resources on c's nodes; a user who may not list
// nodes gets no ephemeral-storage limit and a warning, not a failed
// start (the kubelet's eviction threshold still keeps the node's disk).
func (g *globals) podLimits(ctx context.Context, cfg *config.Config, c *kube.Client, p *config.Profile) (podLimits, error) {
	nodes, nerr := c.NodesStorage(ctx)
	if nerr != nil && !errors.Is(nerr, kube.ErrForbidden) {
		return podLimits{}, nerr
	}
	lim, err := podResources(cfg, p, nodes, nerr)
	if err != nil {
		return lim, err
	}
	for _, w := range lim.Warnings {
		g.log.Warn(w)
	}
	if lim.EphemeralStorage == "" {
		g.log.Warn("no ephemeral-storage limit for the sandbox", "profile", p.Name, "why", lim.StorageFrom)
	}
	return lim, nil
}

// start makes sure t's template and warm pool exist as the profile says,
// claims a sandbox for t's Domain Anchor (or finds the claim of an earlier
// shell) and waits until it is Ready. A claim this call created is
// deleted again when the wait fails: nothing half-made stays behind (the
// template and warm pool are shared and stay).
func (g *globals) start(ctx context.Context, cfg *config.Config, c *kube.Client, t *target, o startOptions) (*running, error) {
	secrets, err := prepareSecrets(ctx, c, t.profile, attemptScope(t), o.secrets)
	if err != nil {
		return nil, err
	}
	if secrets != nil {
		g.log.Debug("secret placeholders and CA", "reused_from", secrets.reused) // "" : new ones
	}
	sidecar, err := g.networkSidecar(ctx, cfg, c, secrets)
	if err != nil {
		return nil, err
	}
	lim, err := g.podLimits(ctx, cfg, c, t.profile)
	if err != nil {
		return nil, err
	}
	objs, pol, err := profileObjects(cfg, t, sidecar, secrets, lim)
	if err != nil {
		return nil, err
	}
	if err := g.checkEnforcement(ctx, cfg, c, t, pol, o.allowUnenforced); err != nil {
		return nil, err
	}
	if len(t.profile.EnvFromHost) > 0 {
		g.log.Warn("env entries read from the host environment are not passed to cluster sandboxes", "profile", t.profile.Name, "names", t.profile.EnvFromHost)
	}
	if t.profile.WithChanges {
		g.log.Warn("with_changes is not carried into cluster sandboxes: the pod's clone is seeded from commits only (docs/KUBERNETES.md, \"Git\")", "profile", t.profile.Name)
	}
	if err := g.ensureState(ctx, cfg, c, t); err != nil {
		return nil, err
	}
	// The Secret first: a pod of the template never waits for it.
	if objs.Secret != nil {
		if err := c.ApplySecret(ctx, objs.Secret); err != nil {
			return nil, err
		}
	}
	if objs.ConfigMap != nil {
		if err := c.ApplyConfigMap(ctx, objs.ConfigMap); err != nil {
			return nil, err
		}
	}
	if _, err := c.ApplyTemplate(ctx, objs.Template); err != nil {
		return nil, err
	}
	pool := kubespec.WarmPool(objs.Template, warmPoolOf(cfg, t))
	if _, err := c.ApplyWarmPool(ctx, pool); err != nil {
		return nil, err
	}
	claim, created, err := c.CreateClaim(ctx, kubespec.Claim(kubespec.ClaimInput{
		Profile: t.profile.Name, DomainHash: t.hash, Workspace: t.workspace, WarmPool: pool.Name, Attempt: t.attempt,
	}))
	if err != nil {
		return nil, err
	}
	if !created && claim.Spec.WarmPoolRef.Name != pool.Name {
		g.log.Warn("the sandbox of this workspace runs an older template of the profile; `lazaret --backend kubernetes stop` and start again to use the new one",
			"claim", claim.Name, "pool", visible.Line(claim.Spec.WarmPoolRef.Name))
	}
	r, err := g.waitReady(ctx, c, claim.Name, o.timeout)
	if err == nil {
		r.refresh = newSecretRefresh(c, objs.Secret, o.secrets)
	}
	if err != nil && created {
		// A fresh context: ctx may be what was cancelled.
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = pendingState(dctx, cfg, c, t, err)
		if derr := c.Delete(dctx, kube.ClaimsGVR, claim.Name); derr != nil {
			err = errors.Join(err, fmt.Errorf("removing the claim again: %w", derr))
		}
	}
	return r, err
}

// attemptScope is t's Domain Anchor when t is an attempt, else "".
func attemptScope(t *target) string {
	if t.attempt == "" {
		return ""
	}
	return t.hash
}

// warmPoolOf is the size of t's warm pool: none for an attempt, whose
// template names its own PVC (a pool per attempt would keep pods for
// every attempt ever started).
func warmPoolOf(cfg *config.Config, t *target) int {
	if t.attempt != "" {
		return 0
	}
	return cfg.WarmPoolOf(t.profile)
}

// notReadyError is a claim that did not become Ready in time.
type notReadyError struct {
	claim   string
	timeout time.Duration
	last    *metav1.Condition
}

func (e *notReadyError) Error() string {
	msg := fmt.Sprintf("sandbox claim %s not Ready after %s", e.claim, e.timeout)
	if e.last == nil {
		return msg + " (no condition reported yet: is the agent-sandbox controller running?)"
	}
	return fmt.Sprintf("%s: last condition %s=%s, %s: %s", msg, visible.Line(e.last.Type), visible.Line(string(e.last.Status)),
		visible.Line(e.last.Reason), visible.Line(e.last.Message))
}

// waitReady polls claim name until its Ready condition is True, then
// finds its Sandbox and pod.
func (g *globals) waitReady(ctx context.Context, c *kube.Client, name string, timeout time.Duration) (*running, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last *metav1.Condition
	// A warm claim is Ready in a fraction of a second, a cold one in one
	// or two: look every 50–200 ms for the first 10 s, then every poll
	// interval (an image pull).
	interval := min(50*time.Millisecond, g.poll)
	started := time.Now()
	for {
		claim, err := c.Claim(wctx, name)
		if err == nil {
			if cond := kubespec.ReadyCondition(claim.Status.Conditions); cond != nil {
				last = cond
				if cond.Status == metav1.ConditionTrue && claim.Status.Sandbox.Name != "" {
					return g.podOf(wctx, c, claim)
				}
			}
		} else if !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, setupError{&notReadyError{claim: name, timeout: timeout, last: last}, "`lazaret --backend kubernetes doctor` checks the controller, the RuntimeClass and the image; --timeout waits longer"}
		case <-time.After(interval):
			interval = min(2*interval, 200*time.Millisecond, g.poll)
			if time.Since(started) > 10*time.Second {
				interval = g.poll
			}
		}
	}
}

// podOf finds the pod of claim's Sandbox: named by the Sandbox's pod-name
// annotation (an adopted warm sandbox), else the Sandbox's own name.
func (g *globals) podOf(ctx context.Context, c *kube.Client, claim *kubespec.SandboxClaim) (*running, error) {
	r := &running{claim: claim.Name, sandbox: claim.Status.Sandbox.Name, pod: claim.Status.Sandbox.Name}
	sb, err := c.Sandbox(ctx, r.sandbox)
	if err != nil {
		return nil, err
	}
	if p := sb.Annotations[kubespec.PodNameAnnotation]; p != "" {
		r.pod = p
	}
	if err := kubespec.CheckName(r.pod); err != nil {
		return nil, fmt.Errorf("sandbox %s names pod %s: %w", visible.Line(r.sandbox), visible.Line(r.pod), err)
	}
	return r, nil
}
