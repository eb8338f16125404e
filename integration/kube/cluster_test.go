//go:build kube

package kube_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// gvisorBanner is the first line of gVisor's own (fake) kernel log: a pod
// that prints it under dmesg runs on the gVisor kernel, not the host's.
const gvisorBanner = "Starting gVisor"

// Labels of agent-sandbox (sigs.k8s.io/agent-sandbox/api/v1beta1).
const (
	launchTypeLabel = "agents.x-k8s.io/launch-type"
	podNameAnnot    = "agents.x-k8s.io/pod-name"
)

// templateYAML is a SandboxTemplate whose pod runs the test image idle.
// runtimeClass "" leaves the cluster's default runtime (runc).
func templateYAML(name, image, runtimeClass string) string {
	rc := ""
	if runtimeClass != "" {
		rc = "\n      runtimeClassName: " + runtimeClass
	}
	return fmt.Sprintf(`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: %s}
spec:
  podTemplate:
    spec:%s
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
      - name: agent
        image: %s
        imagePullPolicy: Never
        command: [sleep, "3600"]
`, name, rc, image)
}

func warmPoolYAML(name, template string, replicas int) string {
	return fmt.Sprintf(`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: %s}
spec:
  replicas: %d
  sandboxTemplateRef: {name: %s}
`, name, replicas, template)
}

func claimYAML(name, pool string) string {
	return fmt.Sprintf(`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: %s}
spec:
  warmPoolRef: {name: %s}
`, name, pool)
}

// boundSandbox waits until the claim is Ready and returns its Sandbox.
func boundSandbox(ctx context.Context, c *Cluster, ns, claim string) map[string]any {
	c.T.Helper()
	var obj map[string]any
	c.WaitFor(ctx, "claim "+claim+" to be Ready", func() (bool, error) {
		var err error
		obj, err = c.Get(ctx, ns, "sandboxclaim", claim)
		return err == nil && ConditionTrue(obj, "Ready") && Str(obj, "status", "sandbox", "name") != "", err
	})
	sb, err := c.Get(ctx, ns, "sandbox", Str(obj, "status", "sandbox", "name"))
	if err != nil {
		c.T.Fatal(err)
	}
	return sb
}

// sandboxPod returns the name of a Sandbox's pod, checked to be running
// under RuntimeClass runtimeClass.
func sandboxPod(ctx context.Context, c *Cluster, ns string, sb map[string]any, runtimeClass string) string {
	c.T.Helper()
	pod := Str(sb, "metadata", "annotations", podNameAnnot)
	if pod == "" {
		pod = Str(sb, "metadata", "name")
	}
	p, err := c.Get(ctx, ns, "pod", pod)
	if err != nil {
		c.T.Fatal(err)
	}
	if got := Str(p, "spec", "runtimeClassName"); got != runtimeClass {
		c.T.Fatalf("pod %s has runtimeClassName %q, want %q", pod, got, runtimeClass)
	}
	if phase := Str(p, "status", "phase"); phase != "Running" {
		c.T.Fatalf("pod %s of a Ready sandbox is %s, not Running", pod, phase)
	}
	return pod
}

// TestClusterClaimRunsGVisorPod: a SandboxTemplate with runtimeClassName
// gvisor and a claim on an empty warm pool (a cold start) become a running
// pod whose kernel is gVisor's. Control: a plain pod of the same image in
// the same namespace, under runc, runs and execs but shows no gVisor.
func TestClusterClaimRunsGVisorPod(t *testing.T) {
	c := NewCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := c.Namespace(ctx)
	c.Apply(ctx, ns, templateYAML("smoke", c.TestImage, "gvisor")+"---\n"+warmPoolYAML("empty", "smoke", 0)+"---\n"+claimYAML("cold", "empty"))

	sb := boundSandbox(ctx, c, ns, "cold")
	if name, lt := Str(sb, "metadata", "name"), Str(sb, "metadata", "labels", launchTypeLabel); name != "cold" || lt != "cold" {
		t.Fatalf("claim on an empty pool: sandbox %q launch-type %q, want a cold sandbox named after the claim", name, lt)
	}
	pod := sandboxPod(ctx, c, ns, sb, "gvisor")
	out, err := c.Exec(ctx, ns, pod, "agent", "dmesg")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, gvisorBanner) {
		t.Fatalf("dmesg in the gvisor pod does not show %q:\n%s", gvisorBanner, out)
	}

	// Positive control: the same image under the default runtime.
	c.Apply(ctx, ns, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - {name: agent, image: %s, imagePullPolicy: Never, command: [sleep, "3600"]}
`, c.TestImage))
	c.WaitFor(ctx, "pod plain to run", func() (bool, error) {
		p, err := c.Get(ctx, ns, "pod", "plain")
		return err == nil && Str(p, "status", "phase") == "Running", err
	})
	if _, err := c.Exec(ctx, ns, "plain", "agent", "true"); err != nil {
		t.Fatalf("control: exec in the runc pod: %v", err)
	}
	// dmesg may be refused under runc (no CAP_SYSLOG): only its output matters.
	out, _ = c.Exec(ctx, ns, "plain", "agent", "dmesg")
	if strings.Contains(out, gvisorBanner) {
		t.Fatalf("control: the runc pod's dmesg shows %q: the check cannot tell gVisor apart", gvisorBanner)
	}
}

// TestClusterWarmPoolClaimBindsFromPool: a SandboxWarmPool of 1 starts a
// gVisor pod before any claim; a claim is then bound to that very sandbox
// (launch-type warm, the pool's name, not the claim's) and runs commands.
// The cold claim of TestClusterClaimRunsGVisorPod is the control that
// the launch-type label tells the two paths apart.
func TestClusterWarmPoolClaimBindsFromPool(t *testing.T) {
	c := NewCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := c.Namespace(ctx)
	c.Apply(ctx, ns, templateYAML("warm", c.TestImage, "gvisor")+"---\n"+warmPoolYAML("pool", "warm", 1))

	var warm string
	c.WaitFor(ctx, "warm pool to have a ready sandbox", func() (bool, error) {
		pool, err := c.Get(ctx, ns, "sandboxwarmpool", "pool")
		if err != nil || Field(pool, "status", "readyReplicas") != float64(1) {
			return false, err
		}
		out, err := c.Run(ctx, "", "get", "sandbox", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}")
		names := strings.Fields(out)
		if err != nil || len(names) != 1 {
			return false, err
		}
		warm = names[0]
		return true, nil
	})

	c.Apply(ctx, ns, claimYAML("user", "pool"))
	sb := boundSandbox(ctx, c, ns, "user")
	if name, lt := Str(sb, "metadata", "name"), Str(sb, "metadata", "labels", launchTypeLabel); name != warm || lt != "warm" {
		t.Fatalf("claim bound to sandbox %q (launch-type %q), want the pool's %q (warm)", name, lt, warm)
	}
	pod := sandboxPod(ctx, c, ns, sb, "gvisor")
	if _, err := c.Exec(ctx, ns, pod, "agent", "true"); err != nil {
		t.Fatal(err)
	}
	out, err := c.Exec(ctx, ns, pod, "agent", "dmesg")
	if err != nil || !strings.Contains(out, gvisorBanner) {
		t.Fatalf("dmesg in the warm pod: %v\n%s", err, out)
	}
}
