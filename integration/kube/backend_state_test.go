//go:build kube

package kube_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBackendPersistentDirs: on the cluster a profile's persistent dir
// lives on a PVC of lazaret's own. The image's content is there at first
// use (seeded, not hidden by the mount); a tool installed under it in one
// sandbox runs in the next one after `stop`; `stop --purge` deletes the
// PVC and the next sandbox has the image's dir again. Positive control in
// the same sandboxes: a file in a dir that is not persistent (/opt) is
// gone after the same stop.
func TestBackendPersistentDirs(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true\nstate_size = \"64Mi\"")
	e.setProfile("[profiles.st]\nimage = \"" + gitImage + "\"\npersistent_dirs = [\"/usr/local\"]")
	install := `set -e
test -d /usr/local/share && echo image-content
grep -q ' /usr/local ' /proc/mounts && echo mounted
printf '#!/bin/sh\necho tool-ran\n' >/usr/local/bin/lzt-tool
chmod +x /usr/local/bin/lzt-tool
echo x >/opt/lzt-ctl`
	out := e.mustLazaret(nil, "exec", "st", "--", "sh", "-c", install)
	if !strings.Contains(out, "image-content") || !strings.Contains(out, "mounted") {
		t.Fatalf("first sandbox: want the image's /usr/local on the volume:\n%s", out)
	}
	e.checkSeedPod()
	pvcs := e.statePVCs()
	if len(pvcs) != 1 || !strings.HasPrefix(pvcs[0], "persistentvolumeclaim/lazaret-state-st-") {
		t.Fatalf("state PVCs %q", pvcs)
	}

	e.mustLazaret(nil, "stop", "st")
	e.waitGone("sandboxclaims,sandboxes,pods")
	if got := e.statePVCs(); len(got) != 1 || got[0] != pvcs[0] {
		t.Fatalf("after stop: PVCs %q, want %s kept", got, pvcs[0])
	}
	check := `lzt-tool 2>/dev/null || echo tool-gone; test -e /opt/lzt-ctl && echo ctl-kept || echo ctl-gone`
	out = e.mustLazaret(nil, "exec", "st", "--", "sh", "-c", check)
	if !strings.Contains(out, "tool-ran") {
		t.Errorf("the installed tool did not survive stop:\n%s", out)
	}
	if !strings.Contains(out, "ctl-gone") {
		t.Errorf("control: a file outside the persistent dirs survived stop:\n%s", out)
	}

	e.mustLazaret(nil, "stop", "--purge", "st")
	e.waitGone("sandboxclaims,sandboxes,pods,persistentvolumeclaims")
	out = e.mustLazaret(nil, "exec", "st", "--", "sh", "-c", check+"; test -d /usr/local/share && echo image-content")
	if !strings.Contains(out, "tool-gone") || !strings.Contains(out, "image-content") {
		t.Errorf("after stop --purge: want the image's /usr/local without the tool:\n%s", out)
	}
}

// checkSeedPod checks the running pod as agent-sandbox made it: under
// gVisor, the seed container first, as restricted as the agent, and its
// log says it copied the dir.
func (e *backendEnv) checkSeedPod() {
	e.t.Helper()
	pods := strings.Fields(e.kube("get", "pods", "-n", e.namespace, "-o", "name"))
	if len(pods) != 1 {
		e.t.Fatalf("pods %q", pods)
	}
	q := `{.spec.runtimeClassName} {.spec.initContainers[0].name} {.spec.initContainers[0].securityContext.capabilities.drop} ` +
		`{.spec.initContainers[0].securityContext.capabilities.add} {.spec.initContainers[0].securityContext.allowPrivilegeEscalation} ` +
		`{.spec.initContainers[0].securityContext.privileged}`
	if got := e.kube("get", pods[0], "-n", e.namespace, "-o", "jsonpath="+q); got != `gvisor lazaret-seed ["ALL"]  false false` {
		e.t.Errorf("seed container in the pod: %q", got)
	}
	if log := e.kube("logs", pods[0], "-n", e.namespace, "-c", "lazaret-seed"); !strings.Contains(log, "lazaret-seed: /usr/local from") {
		e.t.Errorf("seed log:\n%s", log)
	}
}

// statePVCs lists the namespace's persistent dirs' PVCs.
func (e *backendEnv) statePVCs() []string {
	e.t.Helper()
	return strings.Fields(e.kube("get", "pvc", "-n", e.namespace, "-l", "lazaret.dev/state-scope", "-o", "name"))
}

// waitGone waits until the namespace has none of kinds left.
func (e *backendEnv) waitGone(kinds string) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		left := strings.TrimSpace(e.kube("get", kinds, "-n", e.namespace, "-o", "name"))
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("left:\n%s", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestBackendPersistentDirsWarm: with persist = "profile" the warm pool
// works: its pods mount the profile's PVC, so a claim that adopts a warm
// pod (launch-type warm) after stop runs the tool the previous sandbox
// installed (the volume is shared live, not copied at the warm pod's
// start).
func TestBackendPersistentDirsWarm(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true\nstate_size = \"64Mi\"")
	e.setProfile("[profiles.warm]\nimage = \"" + gitImage + "\"\npersistent_dirs = [\"/usr/local\"]\nwarm_pool = 1")
	e.mustLazaret(nil, "exec", "warm", "--", "sh", "-c", `printf '#!/bin/sh\necho tool-ran\n' >/usr/local/bin/lzt-tool && chmod +x /usr/local/bin/lzt-tool`)
	e.mustLazaret(nil, "stop", "warm")
	e.waitGone("sandboxclaims")
	deadline := time.Now().Add(2 * time.Minute)
	for e.kube("get", "sandboxwarmpools", "-n", e.namespace, "-o", "jsonpath={.items[0].status.readyReplicas}") != "1" {
		if time.Now().After(deadline) {
			t.Fatal("the warm pool has no ready sandbox")
		}
		time.Sleep(500 * time.Millisecond)
	}
	if out := e.mustLazaret(nil, "exec", "warm", "--", "lzt-tool"); !strings.Contains(out, "tool-ran") {
		t.Errorf("the warm sandbox lacks the tool:\n%s", out)
	}
	sb := e.kube("get", "sandboxclaims", "-n", e.namespace, "-o", "jsonpath={.items[0].status.sandbox.name}")
	if lt := e.kube("get", "sandbox", sb, "-n", e.namespace, "-o", "jsonpath={.metadata.labels.agents\\.x-k8s\\.io/launch-type}"); lt != "warm" {
		t.Errorf("sandbox %s: launch-type %q, want warm (adopted from the pool)", sb, lt)
	}
}

// TestBackendSeedDefaultDirs measures the first start of a profile with
// the default persistent dirs on lazaret-default (the seed copies its
// /usr, /var/lib/dpkg and /var/lib/apt) against the second (seeded).
// Not part of the tier's run: LAZARET_KUBE_SEED_BENCH=1 runs it.
func TestBackendSeedDefaultDirs(t *testing.T) {
	if os.Getenv("LAZARET_KUBE_SEED_BENCH") != "1" {
		t.Skip("LAZARET_KUBE_SEED_BENCH=1 runs it")
	}
	e := newBackendEnv(t, "allow_unenforced_egress = true")
	e.setProfile("[profiles.seed]\nimage = \"" + gitImage + "\"")
	t0 := time.Now()
	out, errOut, code := e.lazaret(nil, "exec", "--timeout", "10m", "seed", "--", "sh", "-c", "du -sk /usr | cut -f1")
	first := time.Since(t0)
	if code != 0 {
		t.Logf("pods:\n%s", e.kube("-n", e.namespace, "describe", "pods"))
		pods := strings.Fields(e.kube("-n", e.namespace, "get", "pods", "-o", "name"))
		for _, p := range pods {
			l, _ := exec.Command(e.kubectl, "--kubeconfig", e.kubecfg, "-n", e.namespace, "logs", p, "-c", "lazaret-seed").CombinedOutput()
			t.Logf("%s seed log:\n%s", p, l)
		}
		t.Fatalf("first start: exit %d\n%s", code, errOut)
	}
	e.mustLazaret(nil, "stop", "seed")
	e.waitGone("sandboxclaims,sandboxes,pods")
	t1 := time.Now()
	e.mustLazaret(nil, "exec", "seed", "--", "true")
	t.Logf("first start (seeding /usr of %s KiB): %s; second start (seeded): %s", strings.TrimSpace(out), first.Round(100*time.Millisecond), time.Since(t1).Round(100*time.Millisecond))
}
