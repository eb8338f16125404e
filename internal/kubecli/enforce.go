package kubecli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// The answers of the enforcement probe.
const (
	enforced    = "enforced"
	notEnforced = "NOT enforced"
	unknown     = "unknown"
)

// probeResult is what the probe found, and why.
type probeResult struct {
	Result  string
	Detail  string
	Checked time.Time
}

// recordMaxAge is how long a start trusts the namespace's last probe.
const recordMaxAge = 24 * time.Hour

// probeTimeout bounds one probe (three pods started and run).
const probeTimeout = 3 * time.Minute

// needsEgressLimits reports whether pol limits egress at all: anything
// short of both 0.0.0.0/0 and ::/0 does, and only an enforced
// NetworkPolicy makes the limit real on a cluster.
func needsEgressLimits(pol netpolicy.Policy) bool {
	var all4, all6 bool
	for _, c := range pol.AllowEgress {
		all4 = all4 || c.Prefix == netip.MustParsePrefix("0.0.0.0/0")
		all6 = all6 || c.Prefix == netip.MustParsePrefix("::/0")
	}
	return !(all4 && all6)
}

// checkEnforcement refuses a profile that limits egress on a cluster
// where the probe has not shown that NetworkPolicy is enforced, unless the
// user allowed it. The namespace's last probe (doctor's or a start's) is
// reused for a day; without one, the probe runs now.
func (g *globals) checkEnforcement(ctx context.Context, cfg *config.Config, c *kube.Client, t *target, pol netpolicy.Policy, allow bool) error {
	if !needsEgressLimits(pol) {
		return nil
	}
	if allow || cfg.Cluster.AllowUnenforcedEgress {
		g.log.Debug("egress limits on a cluster whose enforcement is not checked: allowed by the user")
		return nil
	}
	res, err := readRecord(ctx, c)
	if err != nil || g.now().Sub(res.Checked) > recordMaxAge {
		fmt.Fprintln(g.io.ErrOut, "lazaret: checking whether the cluster enforces NetworkPolicy (once a day per namespace; `lazaret --backend kubernetes doctor` repeats it)")
		res = g.probeAndRecord(ctx, cfg, c, t.profile.Image)
	}
	if res.Result == enforced {
		return nil
	}
	return refusal{
		msg: fmt.Sprintf("profile %s limits egress, but NetworkPolicy enforcement on this cluster is %s (%s): its sandbox could reach any address",
			t.profile.Name, res.Result, visible.Line(res.Detail)),
		hint: "run it on a cluster whose network plugin enforces NetworkPolicy, or start anyway with --allow-unenforced-egress (or [cluster] allow_unenforced_egress = true)",
	}
}

// readRecord reads the namespace's last probe.
func readRecord(ctx context.Context, c *kube.Client) (probeResult, error) {
	data, err := c.ConfigMap(ctx, kubespec.ProbeRecord)
	if err != nil {
		return probeResult{}, err
	}
	return parseRecord(data)
}

// parseRecord checks a probe record read from the cluster: a known
// result and a time; the detail is shown escaped.
func parseRecord(data map[string]string) (probeResult, error) {
	at, err := time.Parse(time.RFC3339, data["checked"])
	if err != nil {
		return probeResult{}, fmt.Errorf("probe record: checked: %w", err)
	}
	switch r := data["result"]; r {
	case enforced, notEnforced, unknown:
		return probeResult{Result: r, Detail: data["detail"], Checked: at}, nil
	}
	return probeResult{}, errors.New("probe record: bad result")
}

// probeAndRecord runs the probe and keeps its result in the namespace.
func (g *globals) probeAndRecord(ctx context.Context, cfg *config.Config, c *kube.Client, image string) probeResult {
	if cfg.Cluster.ProbeImage != "" {
		image = cfg.Cluster.ProbeImage
	}
	res := g.probe(ctx, c, kubespec.ProbeInput{Image: image, PullPolicy: cfg.Cluster.ImagePullPolicy, RuntimeClass: cfg.Cluster.RuntimeClass})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: kubespec.ProbeRecord, Labels: map[string]string{kubespec.LabelManagedBy: kubespec.ManagedByValue}},
		Data: map[string]string{"result": res.Result, "detail": res.Detail, "checked": res.Checked.UTC().Format(time.RFC3339), "image": image}}
	if err := c.ApplyConfigMap(ctx, cm); err != nil {
		g.log.Warn("cannot record the NetworkPolicy probe's result", "err", err)
	}
	return res
}

// probe runs the enforcement probe: a server pod, a control client that
// must reach it and a client denied all egress by a NetworkPolicy that
// must not. Every object it made is deleted before it returns.
func (g *globals) probe(ctx context.Context, c *kube.Client, in kubespec.ProbeInput) probeResult {
	in.ID = randomID()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	defer g.probeCleanup(c, in)
	res := probeResult{Result: unknown, Checked: g.now()}
	fail := func(format string, a ...any) probeResult { res.Detail = fmt.Sprintf(format, a...); return res }
	if err := c.CreateNetworkPolicy(pctx, kubespec.ProbeDenyPolicy(in)); err != nil {
		return fail("cannot create the probe's NetworkPolicy: %v", err)
	}
	server := kubespec.ProbeServer(in)
	if err := c.CreatePod(pctx, server); err != nil {
		return fail("cannot create the probe's server pod: %v", err)
	}
	ip, err := g.waitPodIP(pctx, c, server.Name)
	if err != nil {
		return fail("probe server pod: %v", err)
	}
	codes := map[string]int{}
	for _, role := range []string{"control", "denied"} {
		p := kubespec.ProbeClient(in, role, ip)
		if err := c.CreatePod(pctx, p); err != nil {
			return fail("cannot create the probe's %s pod: %v", role, err)
		}
	}
	for _, role := range []string{"control", "denied"} {
		code, err := g.waitPodExit(pctx, c, "lazaret-probe-"+in.ID+"-"+role)
		if err != nil {
			return fail("probe %s pod: %v", role, err)
		}
		codes[role] = code
	}
	return decideProbe(res, codes["control"], codes["denied"])
}

// decideProbe reads the clients' exit codes: only a control that
// connected makes the denied client's answer mean anything.
func decideProbe(res probeResult, control, denied int) probeResult {
	switch {
	case control == kubespec.ProbeNoTool || denied == kubespec.ProbeNoTool:
		res.Result, res.Detail = unknown, "the probe image has no tool to connect with (bash, busybox, nc or python3): set [cluster] probe_image"
	case control != kubespec.ProbeConnected:
		res.Result, res.Detail = unknown, fmt.Sprintf("the control pod could not reach the probe server either (exit %d): pod-to-pod traffic does not work, or the image cannot listen", control)
	case denied == kubespec.ProbeConnected:
		res.Result, res.Detail = notEnforced, "a pod under a deny-all egress NetworkPolicy still connected to another pod"
	case denied == kubespec.ProbeFailed:
		res.Result, res.Detail = enforced, "a deny-all egress NetworkPolicy stopped a connection the control pod made"
	default:
		res.Result, res.Detail = unknown, fmt.Sprintf("the denied pod exited %d", denied)
	}
	return res
}

func (g *globals) probeCleanup(c *kube.Client, in kubespec.ProbeInput) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, role := range []string{"server", "control", "denied"} {
		if err := c.DeletePod(ctx, "lazaret-probe-"+in.ID+"-"+role); err != nil {
			g.log.Warn("probe cleanup", "err", err)
		}
	}
	if err := c.DeleteNetworkPolicy(ctx, kubespec.ProbeDenyPolicy(in).Name); err != nil {
		g.log.Warn("probe cleanup", "err", err)
	}
}

// waitPodIP waits until pod name runs and has an address.
func (g *globals) waitPodIP(ctx context.Context, c *kube.Client, name string) (string, error) {
	for {
		p, err := c.Pod(ctx, name)
		if err != nil {
			return "", err
		}
		switch {
		case p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "":
			if _, err := netip.ParseAddr(p.Status.PodIP); err != nil {
				return "", fmt.Errorf("pod address %s: %w", visible.Line(p.Status.PodIP), err)
			}
			return p.Status.PodIP, nil
		case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			return "", fmt.Errorf("exited before listening (%s): the probe image needs busybox, nc or python3 to listen; set [cluster] probe_image", p.Status.Phase)
		}
		if err := g.sleep(ctx); err != nil {
			return "", err
		}
	}
}

// waitPodExit waits until pod name's container has terminated and returns
// its exit code.
func (g *globals) waitPodExit(ctx context.Context, c *kube.Client, name string) (int, error) {
	for {
		p, err := c.Pod(ctx, name)
		if err != nil {
			return 0, err
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Terminated != nil {
				return int(s.State.Terminated.ExitCode), nil
			}
		}
		if err := g.sleep(ctx); err != nil {
			return 0, err
		}
	}
}

// sleep waits one poll interval, or returns ctx's error.
func (g *globals) sleep(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(g.poll):
		return nil
	}
}

// randomID is 8 random hex digits.
func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
