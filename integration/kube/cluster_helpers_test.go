//go:build kube

// Package kube_test is the Kubernetes test tier: end-to-end tests against
// the one-node cluster scripts/kube-cluster starts (etcd, API server,
// kubelet, containerd with gVisor as RuntimeClass "gvisor", agent-sandbox).
// scripts/kube-test builds and starts it, runs `go test -tags kube` here
// and stops it; the tests read where it is from the environment
// (scripts/kube-cluster env): LAZARET_KUBECONFIG, LAZARET_KUBECTL,
// LAZARET_KUBE_TEST_IMAGE. They drive the cluster through kubectl so the
// main module needs no Kubernetes client for them.
//
// This file holds the helpers every test file of the tier may use.
package kube_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Cluster is the running test cluster, seen through kubectl.
type Cluster struct {
	T          testing.TB
	Kubeconfig string
	Kubectl    string
	// TestImage is a small local image (busybox: sh, dmesg, sleep, true)
	// that scripts/kube-cluster imports; tests run it with
	// imagePullPolicy Never, as no registry is reachable.
	TestImage string
}

// NewCluster returns the cluster named by the environment, or fails the
// test: the tier runs only through scripts/kube-test (or after
// `eval "$(scripts/kube-cluster env)"`).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{T: t, Kubeconfig: os.Getenv("LAZARET_KUBECONFIG"), Kubectl: os.Getenv("LAZARET_KUBECTL"), TestImage: os.Getenv("LAZARET_KUBE_TEST_IMAGE")}
	if c.Kubeconfig == "" || c.Kubectl == "" || c.TestImage == "" {
		t.Fatal("LAZARET_KUBECONFIG, LAZARET_KUBECTL and LAZARET_KUBE_TEST_IMAGE are not set: run this tier through scripts/kube-test, or eval \"$(scripts/kube-cluster env)\" after scripts/kube-cluster up")
	}
	return c
}

// Run runs kubectl with args (stdin from in, if not empty) and returns its
// standard output; the error carries its standard error.
func (c *Cluster) Run(ctx context.Context, in string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if in != "" {
		cmd.Stdin = strings.NewReader(in)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// MustRun is Run that fails the test on error.
func (c *Cluster) MustRun(ctx context.Context, in string, args ...string) string {
	c.T.Helper()
	out, err := c.Run(ctx, in, args...)
	if err != nil {
		c.T.Fatal(err)
	}
	return out
}

// Apply creates or updates the objects of a YAML document in namespace ns.
func (c *Cluster) Apply(ctx context.Context, ns, yaml string) {
	c.T.Helper()
	c.MustRun(ctx, yaml, "apply", "-n", ns, "-f", "-")
}

// Namespace makes a namespace of its own for the test (a unique name, so
// tests of other files and reruns never meet) and deletes it, with all it
// holds, when the test ends.
func (c *Cluster) Namespace(ctx context.Context) string {
	c.T.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		c.T.Fatal(err)
	}
	name := "lzk-" + hex.EncodeToString(b[:])
	c.MustRun(ctx, "", "create", "namespace", name)
	// The controller-manager makes the default service account, which the
	// API server requires before it admits any pod.
	c.WaitFor(ctx, "service account default in "+name, func() (bool, error) {
		_, err := c.Run(ctx, "", "get", "serviceaccount", "default", "-n", name)
		return err == nil, nil
	})
	c.T.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = c.Run(cctx, "", "delete", "namespace", name, "--wait=false")
	})
	return name
}

// Get returns an object as decoded JSON.
func (c *Cluster) Get(ctx context.Context, ns, kind, name string) (map[string]any, error) {
	out, err := c.Run(ctx, "", "get", "-n", ns, kind, name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		return nil, fmt.Errorf("decoding %s %s/%s: %w", kind, ns, name, err)
	}
	return obj, nil
}

// WaitFor polls cond until it holds, failing the test when ctx ends first
// (the caller's deadline bounds it; no assertion depends on timing).
func (c *Cluster) WaitFor(ctx context.Context, what string, cond func() (bool, error)) {
	c.T.Helper()
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			c.T.Fatalf("waiting for %s: %v (last error: %v)", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Exec runs argv in a container of a pod through the API server (the
// kubelet's streaming exec) and returns its standard output.
func (c *Cluster) Exec(ctx context.Context, ns, pod, container string, argv ...string) (string, error) {
	args := []string{"exec", "-n", ns, pod}
	if container != "" {
		args = append(args, "-c", container)
	}
	return c.Run(ctx, "", append(append(args, "--"), argv...)...)
}

// Field walks a decoded object: Field(obj, "status", "sandbox", "name").
func Field(obj map[string]any, path ...string) any {
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// Str is Field as a string ("" when absent).
func Str(obj map[string]any, path ...string) string {
	s, _ := Field(obj, path...).(string)
	return s
}

// ConditionTrue reports whether obj's status condition typ is "True".
func ConditionTrue(obj map[string]any, typ string) bool {
	conds, _ := Field(obj, "status", "conditions").([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}
