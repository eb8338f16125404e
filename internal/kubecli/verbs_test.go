package kubecli

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"

	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
)

// addClaim puts a claim made by lazaret into the fake cluster.
func (e *env) addClaim(profile, hash, workspace, pool string) {
	e.t.Helper()
	c := kubespec.Claim(kubespec.ClaimInput{Profile: profile, DomainHash: hash, Workspace: workspace, WarmPool: pool})
	c.CreationTimestamp = metav1.NewTime(fixedNow.Add(-90 * time.Minute))
	if _, _, err := e.cluster.Client.CreateClaim(context.Background(), c); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) addTemplate(profile, name string) {
	e.t.Helper()
	tpl := &kubespec.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kubespec.LabelManagedBy: kubespec.ManagedByValue, kubespec.LabelProfile: profile}}}
	if _, err := e.cluster.Client.ApplyTemplate(context.Background(), tpl); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.cluster.Client.ApplyWarmPool(context.Background(), kubespec.WarmPool(tpl, 0)); err != nil {
		e.t.Fatal(err)
	}
}

func TestPsEscapesClusterText(t *testing.T) {
	e := newEnv(t, plainCfg)
	if code := e.run("ps"); code != 0 || !strings.Contains(e.out.String(), "no lazaret sandboxes") {
		t.Fatalf("empty ps: %d %q", code, e.out.String())
	}
	e.addClaim("default", e.hash("default"), e.ws, "pool-a")
	e.addClaim("dev", "0123456789ab", "/evil\x1b]0;pwned\x07\n\tname", "pool-b")
	if code := e.run("ps"); code != 0 {
		t.Fatalf("ps: %d %s", code, e.errOut.String())
	}
	out := e.out.String()
	if !strings.Contains(out, "lazaret-"+e.hash("default")) || !strings.Contains(out, "lazaret-0123456789ab") || !strings.Contains(out, "1h0m0s") {
		t.Errorf("ps output %q", out)
	}
	if strings.ContainsAny(out, "\x1b\x07") || strings.Count(out, "\n") != 3 {
		t.Errorf("cluster text not escaped: %q", out)
	}
}

func TestStopSelection(t *testing.T) {
	e := newEnv(t, plainCfg+"[profiles.dev]\nimage = \"a:1\"\n")
	e.addTemplate("default", "tpl-used")
	e.addTemplate("default", "tpl-old")
	e.addTemplate("dev", "tpl-dev")
	e.addClaim("default", e.hash("default"), e.ws, "tpl-used")
	e.addClaim("default", "aaaaaaaaaaaa", "/other", "tpl-used")
	e.addClaim("dev", e.hash("dev"), e.ws, "tpl-dev")
	names := func() (n []string) {
		for _, c := range e.claims() {
			n = append(n, c.Name)
		}
		return n
	}
	if code := e.run("stop"); code != 0 || len(e.claims()) != 2 {
		t.Fatalf("stop: %d, left %v", code, names())
	}
	for _, n := range names() {
		if n == "lazaret-"+e.hash("default") {
			t.Fatal("stop left this workspace's claim")
		}
	}
	if code := e.run("stop"); code != 0 || !strings.Contains(e.out.String(), "no sandbox of profile default") {
		t.Errorf("second stop: %d %q", code, e.out.String())
	}
	// --all of one profile; --purge removes its unused templates.
	if code := e.run("stop", "--all", "--purge", "default"); code != 0 || len(e.claims()) != 1 || e.claims()[0].Name != "lazaret-"+e.hash("dev") {
		t.Fatalf("stop --all default: %d, left %v; %s", code, names(), e.errOut.String())
	}
	tpls, _ := e.cluster.Client.Templates(context.Background(), "")
	pools, _ := e.cluster.Client.WarmPools(context.Background(), "")
	if len(tpls) != 1 || tpls[0].Name != "tpl-dev" || len(pools) != 1 {
		t.Errorf("after purge: templates %v, %d pools", tpls, len(pools))
	}
	if code := e.run("stop", "--all"); code != 0 || len(e.claims()) != 0 {
		t.Errorf("stop --all: %d, left %v", code, names())
	}
}

func TestStatus(t *testing.T) {
	e := newEnv(t, plainCfg)
	if code := e.run("status"); code != 0 || !strings.Contains(e.out.String(), "no sandbox for") {
		t.Fatalf("status without claim: %d %q", code, e.out.String())
	}
	e.addClaim("default", e.hash("default"), e.ws, "tpl")
	e.readyAfter(1, metav1.Condition{})
	rc := "gvisor"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lazaret-" + e.hash("default") + "-pod", Namespace: "agents"},
		Spec: corev1.PodSpec{NodeName: "node-1", RuntimeClassName: &rc}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := e.cluster.Core.CoreV1().Pods("agents").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := e.run("status"); code != 0 {
		t.Fatalf("status: %d %s", code, e.errOut.String())
	}
	out := e.out.String()
	wantLines(t, "status", out, "state:          Ready", "pod:            "+pod.Name, "node:           node-1", "runtime class:  gvisor", "template:       tpl", "age:            1h0m0s")
}

// doctorCluster is a healthy fake cluster for doctor.
func doctorCluster(e *env, leaseAge time.Duration, resources bool) {
	disc := e.cluster.Core.Discovery().(*fakediscovery.FakeDiscovery)
	disc.FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	if resources {
		disc.Resources = []*metav1.APIResourceList{
			{GroupVersion: "agents.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "sandboxes"}}},
			{GroupVersion: "extensions.agents.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "sandboxtemplates"}, {Name: "sandboxwarmpools"}, {Name: "sandboxclaims"}}},
		}
	}
	ctx := context.Background()
	core := e.cluster.Core
	_, _ = core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}, metav1.CreateOptions{})
	_, _ = core.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}, metav1.CreateOptions{})
	holder, renewed := "ctrl-1", metav1.NewMicroTime(fixedNow.Add(-leaseAge))
	_, _ = core.CoordinationV1().Leases("agent-sandbox-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: controllerLease},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed}}, metav1.CreateOptions{})
}

func TestDoctor(t *testing.T) {
	e := newEnv(t, plainCfg)
	doctorCluster(e, 3*time.Second, true)
	e.record(notEnforced)
	code := e.run("doctor", "--no-probe")
	out := e.out.String()
	if code != 0 {
		t.Fatalf("doctor: %d\n%s%s", code, out, e.errOut.String())
	}
	wantLines(t, "doctor", out,
		"ok    cluster: https://fake:6443 (v1.37.2)",
		"ok    namespace: agents",
		"ok    agents.x-k8s.io/v1beta1: [sandboxes] served",
		"ok    extensions.agents.x-k8s.io/v1beta1",
		"ok    agent-sandbox controller: lease agent-sandbox-system/"+controllerLease+" renewed 3s ago by ctrl-1",
		"ok    runtime class gvisor: handler runsc",
		"WARN  NetworkPolicy: NOT enforced: test",
	)
}

func TestDoctorFailures(t *testing.T) {
	e := newEnv(t, plainCfg+"runtime_class = \"kata\"\n")
	doctorCluster(e, 10*time.Minute, false)
	code := e.run("doctor", "--no-probe")
	out := e.out.String()
	if code != 3 {
		t.Fatalf("doctor: %d, want 3\n%s", code, out)
	}
	wantLines(t, "doctor", out,
		"FAIL  agents.x-k8s.io/v1beta1:",
		"FAIL  agent-sandbox controller: its lease agent-sandbox-system/"+controllerLease+" was last renewed 10m0s ago",
		"FAIL  runtime class kata:",
		"WARN  NetworkPolicy: unknown: no probe result",
	)
	if !strings.Contains(e.errOut.String(), "check(s) failed") {
		t.Errorf("stderr %q", e.errOut.String())
	}
}

func TestBadFlagsAndConfig(t *testing.T) {
	e := newEnv(t, "[cluster]\nnamespace = \"Bad\"\n")
	if code := e.run("ps"); code != 4 || !strings.Contains(e.errOut.String(), "config.toml:2: cluster.namespace: invalid namespace") {
		t.Errorf("bad config: %d %q", code, e.errOut.String())
	}
	e = newEnv(t, plainCfg)
	if code := e.run("ps", "--namespace", "UPPER"); code != 2 || !strings.Contains(e.errOut.String(), "--namespace: invalid namespace") {
		t.Errorf("bad --namespace: %d %q", code, e.errOut.String())
	}
	if code := e.run("exec", "--timeout", "0s", "--", "true"); code != 2 || !strings.Contains(e.errOut.String(), "--timeout") {
		t.Errorf("bad --timeout: %d %q", code, e.errOut.String())
	}
	if code := e.run("exec", "dev", "--"); code != 2 || !strings.Contains(e.errOut.String(), "no command after --") {
		t.Errorf("no command: %d %q", code, e.errOut.String())
	}
}
