// Command kube benchmarks the Kubernetes tier's start paths against a local
// cold start, interleaved in one run so machine load affects all alike, and
// prints a markdown table of medians and ratios to the local one:
//
//   - warm claim: a SandboxClaim on a warm pool of 1 (gVisor), from
//     `kubectl create` to the first command (`kubectl exec … true`) done;
//   - cold Sandbox: a Sandbox with the same pod template, from create to
//     the first command done;
//   - local cold: `lazaret exec default -- true` with no sandbox running
//     (bench/lifecycle's "cold");
//   - through lazaret: `lazaret --backend kubernetes exec -- true` in a new
//     workspace (a new claim, with the netd sidecar), from a warm pool of
//     1 and cold (a pool of 0).
//
// Both cluster paths go through kubectl, as a user would (each kubectl run
// costs the same on both). It runs as the unprivileged podman user under
// scripts/kube-bench, which starts the test cluster (scripts/kube-cluster)
// and sets LAZARET_BIN, LAZARET_KUBECONFIG, LAZARET_KUBECTL and
// LAZARET_KUBE_TEST_IMAGE. KUBE_BENCH_N sets the rounds (default 5).
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/kube:", err)
		os.Exit(1)
	}
}

type bench struct {
	kubectl, kubeconfig, image, ns string
	bin, config, ws, root          string
	netdImage, dns                 string
}

func (b *bench) kc(in string, args ...string) (string, error) {
	cmd := exec.Command(b.kubectl, append([]string{"--kubeconfig", b.kubeconfig, "-n", b.ns}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if in != "" {
		cmd.Stdin = strings.NewReader(in)
	}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String()), nil
}

const podSpec = `    spec:
      runtimeClassName: gvisor
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
      - {name: agent, image: %s, imagePullPolicy: Never, command: [sleep, "3600"]}
`

func (b *bench) setup() error {
	// The controller-manager makes the default service account just after
	// the namespace; pods are refused until it exists.
	if _, err := b.kc("", "wait", "--for", "create", "--timeout", "60s", "serviceaccount/default"); err != nil {
		return err
	}
	_, err := b.kc(fmt.Sprintf(`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: bench}
spec:
  podTemplate:
`+podSpec+`---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: pool}
spec:
  replicas: 1
  sandboxTemplateRef: {name: bench}
`, b.image), "apply", "-f", "-")
	return err
}

// warmClaim waits (untimed) for the pool to be ready, then times a claim
// on it up to its first command.
func (b *bench) warmClaim(i int) (time.Duration, error) {
	if _, err := b.kc("", "wait", "--for", "jsonpath={.status.readyReplicas}=1", "--timeout", "120s", "sandboxwarmpool/pool"); err != nil {
		return 0, err
	}
	name := fmt.Sprintf("claim-%d", i)
	start := time.Now()
	if _, err := b.kc(fmt.Sprintf("apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: %s}\nspec:\n  warmPoolRef: {name: pool}\n", name), "create", "-f", "-"); err != nil {
		return 0, err
	}
	if _, err := b.kc("", "wait", "--for", "condition=Ready", "--timeout", "120s", "sandboxclaim/"+name); err != nil {
		return 0, err
	}
	sb, err := b.kc("", "get", "sandboxclaim", name, "-o", "jsonpath={.status.sandbox.name}")
	if err != nil {
		return 0, err
	}
	if _, err := b.kc("", "exec", sb, "--", "true"); err != nil {
		return 0, err
	}
	d := time.Since(start)
	_, err = b.kc("", "delete", "sandboxclaim", name, "--wait=false")
	return d, err
}

// coldSandbox times a Sandbox from create to its first command.
func (b *bench) coldSandbox(i int) (time.Duration, error) {
	name := fmt.Sprintf("cold-%d", i)
	start := time.Now()
	if _, err := b.kc(fmt.Sprintf("apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {name: %s}\nspec:\n  podTemplate:\n"+podSpec, name, b.image), "create", "-f", "-"); err != nil {
		return 0, err
	}
	if _, err := b.kc("", "wait", "--for", "condition=Ready", "--timeout", "120s", "sandbox/"+name); err != nil {
		return 0, err
	}
	if _, err := b.kc("", "exec", name, "--", "true"); err != nil {
		return 0, err
	}
	d := time.Since(start)
	_, err := b.kc("", "delete", "sandbox", name, "--wait=false")
	return d, err
}

// localCold times `lazaret exec default -- true` with no sandbox running.
func (b *bench) localCold() (time.Duration, error) {
	cmd := exec.Command(filepath.Join(b.bin, "lazaret"), "--config", b.config, "exec", "default", "--", "true")
	cmd.Dir = b.ws
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("lazaret exec: %w: %s", err, errb.String())
	}
	d := time.Since(start)
	stop := exec.Command(filepath.Join(b.bin, "lazaret"), "--config", b.config, "stop", "--all")
	stop.Dir = b.ws
	_ = stop.Run()
	return d, nil
}

// lazaretKube times `lazaret --backend kubernetes exec PROFILE -- true`
// in a new workspace (its own claim), then stops it (untimed). With a warm
// pool it first waits (untimed) for the profile's pool to be ready.
func (b *bench) lazaretKube(profile string, i int) (time.Duration, error) {
	if profile == "warm" && i > 0 {
		if _, err := b.kc("", "wait", "--for", "jsonpath={.status.readyReplicas}=1", "--timeout", "120s", "sandboxwarmpool", "-l", "lazaret.dev/profile=warm"); err != nil {
			return 0, err
		}
	}
	ws := filepath.Join(b.root, fmt.Sprintf("ws-%s-%d", profile, i))
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return 0, err
	}
	lz := func(args ...string) *exec.Cmd {
		return exec.Command(filepath.Join(b.bin, "lazaret"), append([]string{"--backend", "kubernetes", "--config", b.config, "--workspace", ws}, args...)...)
	}
	cmd := lz("exec", profile, "--", "true")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("lazaret --backend kubernetes exec %s: %w: %s", profile, err, errb.String())
	}
	d := time.Since(start)
	if out, err := lz("stop", profile).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("lazaret --backend kubernetes stop: %w: %s", err, out)
	}
	return d, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func newBench() (*bench, func(), error) {
	b := &bench{kubectl: os.Getenv("LAZARET_KUBECTL"), kubeconfig: os.Getenv("LAZARET_KUBECONFIG"),
		image: os.Getenv("LAZARET_KUBE_TEST_IMAGE"), bin: os.Getenv("LAZARET_BIN"),
		netdImage: os.Getenv("LAZARET_KUBE_NETD_IMAGE"), dns: os.Getenv("LAZARET_KUBE_DNS")}
	if b.kubectl == "" || b.kubeconfig == "" || b.image == "" || b.bin == "" || b.netdImage == "" || b.dns == "" {
		return nil, nil, fmt.Errorf("LAZARET_KUBECTL, LAZARET_KUBECONFIG, LAZARET_KUBE_TEST_IMAGE, LAZARET_KUBE_NETD_IMAGE, LAZARET_KUBE_DNS and LAZARET_BIN must be set (run: BENCH=kube make bench)")
	}
	root, err := os.MkdirTemp("", "lazaret-bench-kube-")
	if err != nil {
		return nil, nil, err
	}
	b.root, b.config, b.ws = root, filepath.Join(root, "config.toml"), filepath.Join(root, "ws")
	cleanup := func() {
		_, _ = b.kc("", "delete", "namespace", b.ns, "--wait=false")
		_ = exec.Command("podman", "unshare", "rm", "-rf", root).Run()
		_ = os.RemoveAll(root)
	}
	if err := os.MkdirAll(b.ws, 0o755); err != nil {
		return nil, cleanup, err
	}
	b.ns = "lzk-bench-" + strconv.Itoa(os.Getpid())
	cfg := fmt.Sprintf(`data_root = %q
[cluster]
kubeconfig = %q
namespace = %q
image_pull_policy = "Never"
allow_unenforced_egress = true
netd_image = %q
dns = [%q]
[profiles.warm]
image = %q
warm_pool = 1
persistent_dirs = []
[profiles.cold]
image = %q
persistent_dirs = []
`, filepath.Join(root, "data"), b.kubeconfig, b.ns, b.netdImage, b.dns, b.image, b.image)
	if err := os.WriteFile(b.config, []byte(cfg), 0o600); err != nil {
		return nil, cleanup, err
	}
	if _, err := exec.Command(b.kubectl, "--kubeconfig", b.kubeconfig, "create", "namespace", b.ns).CombinedOutput(); err != nil {
		return nil, cleanup, fmt.Errorf("creating namespace %s: %w", b.ns, err)
	}
	return b, cleanup, b.setup()
}

func run() error {
	n := 5
	if v, err := strconv.Atoi(os.Getenv("KUBE_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	b, cleanup, err := newBench()
	if cleanup != nil {
		defer cleanup()
	}
	if err != nil {
		return err
	}
	// Round 0 is a warm-up for each path (page cache, image snapshots).
	var warm, cold, local, lzWarm, lzCold []time.Duration
	for i := 0; i <= n; i++ {
		lw, err := b.lazaretKube("warm", i)
		if err != nil {
			return err
		}
		lc, err := b.lazaretKube("cold", i)
		if err != nil {
			return err
		}
		w, err := b.warmClaim(i)
		if err != nil {
			return err
		}
		c, err := b.coldSandbox(i)
		if err != nil {
			return err
		}
		l, err := b.localCold()
		if err != nil {
			return err
		}
		if i > 0 {
			warm, cold, local = append(warm, w), append(cold, c), append(local, l)
			lzWarm, lzCold = append(lzWarm, lw), append(lzCold, lc)
		}
	}
	lm := median(local)
	fmt.Printf("\n| start to first command (median of %d) | time | vs local cold |\n|---|---|---|\n", n)
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"claim from a warm pool (gVisor pod), kubectl", median(warm)}, {"cold Sandbox (gVisor pod), kubectl", median(cold)},
		{"`lazaret --backend kubernetes exec -- true`, warm pool (new claim, netd sidecar)", median(lzWarm)},
		{"`lazaret --backend kubernetes exec -- true`, cold (pool of 0)", median(lzCold)},
		{"local `lazaret exec default -- true`, cold", lm}} {
		fmt.Printf("| %s | %.2f s | %.2f× |\n", r.name, r.d.Seconds(), float64(r.d)/float64(lm))
	}
	return nil
}
