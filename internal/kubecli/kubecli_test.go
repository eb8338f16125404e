package kubecli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/adapter/kube/kubetest"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
)

// env is one test's fake cluster, configuration and workspace.
type env struct {
	t       *testing.T
	cluster *kubetest.Cluster
	cfgFile string
	ws      string
	out     bytes.Buffer
	errOut  bytes.Buffer
}

var fixedNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, cfg string) *env {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"home", "data", "run", "ws"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(root, "data"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(root, "run"))
	e := &env{t: t, cluster: kubetest.New("agents"), cfgFile: filepath.Join(root, "config.toml"), ws: filepath.Join(root, "ws")}
	if err := os.WriteFile(e.cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// run runs lazaret-kube with args and returns its exit code.
func (e *env) run(args ...string) int {
	e.t.Helper()
	e.out.Reset()
	e.errOut.Reset()
	g := newGlobals(IO{In: strings.NewReader(""), Out: &e.out, ErrOut: &e.errOut})
	g.connect = func(config.Cluster) (*kube.Client, error) { return e.cluster.Client, nil }
	g.now = func() time.Time { return fixedNow }
	g.poll = time.Millisecond
	return run(g, append([]string{"lazaret-kube", "--config", e.cfgFile, "--workspace", e.ws}, args...))
}

func (e *env) hash(profile string) string { return domain.Hash(profile, e.ws) }

// record stores a probe result as doctor would.
func (e *env) record(result string) {
	e.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: kubespec.ProbeRecord, Namespace: "agents"},
		Data: map[string]string{"result": result, "detail": "test", "checked": fixedNow.Add(-time.Hour).Format(time.RFC3339)}}
	if _, err := e.cluster.Core.CoreV1().ConfigMaps("agents").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// readyAfter makes a claim Ready (and its Sandbox exist) at the n-th
// read; before that its Ready condition is cond.
func (e *env) readyAfter(n int32, cond metav1.Condition) {
	var reads atomic.Int32
	e.cluster.Dynamic.PrependReactor("get", "sandboxclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.GetAction).GetName()
		obj, err := e.cluster.Dynamic.Tracker().Get(kube.ClaimsGVR, "agents", name)
		if err != nil {
			return true, nil, err
		}
		u := obj.(*unstructured.Unstructured).DeepCopy()
		c := cond
		if n > 0 && reads.Add(1) >= n {
			c = metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DependenciesReady"}
			_ = unstructured.SetNestedField(u.Object, name, "status", "sandbox", "name")
			sb := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
				"metadata": map[string]any{"name": name, "namespace": "agents", "annotations": map[string]any{kubespec.PodNameAnnotation: name + "-pod"}}}}
			_ = e.cluster.Dynamic.Tracker().Create(kube.SandboxesGVR, sb, "agents")
		}
		m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		_ = unstructured.SetNestedSlice(u.Object, []any{m}, "status", "conditions")
		return true, u, nil
	})
}

func (e *env) claims() []kubespec.SandboxClaim {
	e.t.Helper()
	cl, err := e.cluster.Client.Claims(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	return cl
}

// plainCfg turns Host Escalation off: its tests (escalation_test.go)
// answer the relay's and the holder's execs.
const plainCfg = "[escalation]\nenabled = false\n[cluster]\nnamespace = \"agents\"\n"

func TestExecRunsInClaimedSandbox(t *testing.T) {
	e := newEnv(t, plainCfg+"[profiles.dev]\nimage = \"agent:1\"\nwarm_pool = 2\n")
	e.record(enforced)
	e.readyAfter(2, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SandboxNotReady"})
	e.cluster.Exec.Run = func(kube.ExecRequest) (int, error) { return 7, nil }
	if code := e.run("exec", "dev", "--", "cat", "/proc/version"); code != 7 {
		t.Fatalf("exit %d, want the command's 7; stderr %s", code, e.errOut.String())
	}
	reqs := e.cluster.Exec.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d execs", len(reqs))
	}
	r := reqs[0]
	claim := "lazaret-" + e.hash("dev")
	if r.Pod != claim+"-pod" || r.Container != "agent" || r.Namespace != "agents" || r.TTY {
		t.Errorf("exec %+v", r)
	}
	if got := strings.Join(r.Command[len(r.Command)-2:], " "); got != "cat /proc/version" || r.Command[0] != "/bin/sh" {
		t.Errorf("command %q", r.Command)
	}
	cl := e.claims()
	if len(cl) != 1 || cl[0].Name != claim || cl[0].Annotations[kubespec.AnnotationWorkspace] != e.ws {
		t.Fatalf("claims %+v", cl)
	}
	pools, _ := e.cluster.Client.WarmPools(context.Background(), "")
	if len(pools) != 1 || *pools[0].Spec.Replicas != 2 || pools[0].Name != cl[0].Spec.WarmPoolRef.Name {
		t.Fatalf("pools %+v", pools)
	}
	// A second exec joins the same claim.
	e.cluster.Exec.Run = nil
	if code := e.run("exec", "dev", "--", "true"); code != 0 || len(e.claims()) != 1 {
		t.Fatalf("second exec: exit %d, %d claims; %s", code, len(e.claims()), e.errOut.String())
	}
}

func TestExecExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{&kube.StartError{Code: 127, Err: errors.New(`exec: "nope": executable file not found`)}, 127},
		{&kube.StartError{Code: 126, Err: errors.New("exec /x: permission denied")}, 126},
		{errors.New("upgrade request failed"), 125},
	} {
		e := newEnv(t, plainCfg+"allow_unenforced_egress = true\n")
		e.readyAfter(1, metav1.Condition{})
		e.cluster.Exec.Run = func(kube.ExecRequest) (int, error) { return 0, c.err }
		if code := e.run("exec", "--", "nope"); code != c.want {
			t.Errorf("%v: exit %d, want %d; %s", c.err, code, c.want, e.errOut.String())
		}
	}
}

// TestReadyTimeout: a claim that never gets Ready ends in one line that
// names the claim and the last condition, escaped (the cluster's text),
// and the claim this start created is deleted again.
func TestReadyTimeout(t *testing.T) {
	e := newEnv(t, plainCfg+"allow_unenforced_egress = true\n")
	e.readyAfter(0, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ReconcilerError", Message: "image pull failed\x1b[2J\nfake prompt"})
	code := e.run("exec", "--timeout", "50ms", "--", "true")
	msg := e.errOut.String()
	if code != 3 {
		t.Fatalf("exit %d, want 3; %s", code, msg)
	}
	claim := "lazaret-" + e.hash("default")
	if !strings.Contains(msg, "sandbox claim "+claim+" not Ready after 50ms") || !strings.Contains(msg, "ReconcilerError: image pull failed") {
		t.Errorf("message %q", msg)
	}
	if strings.ContainsRune(msg, 0x1b) || strings.Count(msg, "\n") != 2 {
		t.Errorf("cluster text not escaped to one line: %q", msg)
	}
	if cl := e.claims(); len(cl) != 0 {
		t.Errorf("orphan claim left: %v", cl[0].Name)
	}
}

// TestEnforcementRefusal: a profile that limits egress does not start on
// a cluster whose enforcement the probe did not show, unless the user
// says so; the same start passes with an "enforced" record (the positive
// control is TestExecRunsInClaimedSandbox).
func TestEnforcementRefusal(t *testing.T) {
	for _, result := range []string{notEnforced, unknown} {
		e := newEnv(t, plainCfg)
		e.record(result)
		e.readyAfter(1, metav1.Condition{})
		code := e.run("exec", "--", "true")
		msg := e.errOut.String()
		if code != 5 || !strings.Contains(msg, "profile default limits egress, but NetworkPolicy enforcement on this cluster is "+result) ||
			!strings.Contains(msg, "--allow-unenforced-egress") || !strings.Contains(msg, "allow_unenforced_egress = true") {
			t.Errorf("%s: exit %d, %q", result, code, msg)
		}
		if len(e.claims()) != 0 || len(e.cluster.Exec.Requests()) != 0 {
			t.Errorf("%s: something started", result)
		}
		if code := e.run("exec", "--allow-unenforced-egress", "--", "true"); code != 0 {
			t.Errorf("%s with the flag: exit %d, %s", result, code, e.errOut.String())
		}
	}
	// A profile that allows every destination needs no enforcement.
	e := newEnv(t, plainCfg+"[profiles.open]\nimage = \"a:1\"\nallow_egress = [\"0.0.0.0/0\", \"::/0\"]\n")
	e.record(notEnforced)
	e.readyAfter(1, metav1.Condition{})
	if code := e.run("exec", "open", "--", "true"); code != 0 {
		t.Errorf("open profile: exit %d, %s", code, e.errOut.String())
	}
}

func TestDecideProbe(t *testing.T) {
	for _, c := range []struct {
		control, denied int
		want            string
	}{
		{0, 1, enforced},
		{0, 0, notEnforced},
		{1, 1, unknown},
		{1, 0, unknown},
		{3, 3, unknown},
		{0, 3, unknown},
		{0, 137, unknown},
	} {
		if got := decideProbe(probeResult{}, c.control, c.denied); got.Result != c.want || got.Detail == "" {
			t.Errorf("control %d denied %d: %+v, want %s", c.control, c.denied, got, c.want)
		}
	}
}

// TestProbeRuns drives the probe against the fake cluster, whose pods
// exit as scripted, and checks it leaves nothing behind.
func TestProbeRuns(t *testing.T) {
	for _, c := range []struct {
		denied int32
		want   string
	}{{1, enforced}, {0, notEnforced}} {
		e := newEnv(t, plainCfg)
		e.cluster.Core.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			name := a.(k8stesting.GetAction).GetName()
			obj, err := e.cluster.Core.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "agents", name)
			if err != nil {
				return true, nil, err
			}
			p := obj.(*corev1.Pod).DeepCopy()
			switch p.Labels[kubespec.LabelProbeRole] {
			case "server":
				p.Status.Phase, p.Status.PodIP = corev1.PodRunning, "10.1.2.3"
			case "control":
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}
			case "denied":
				if p.Spec.Containers[0].Env[0].Value != "10.1.2.3" {
					return true, nil, fmt.Errorf("client not pointed at the server: %v", p.Spec.Containers[0].Env)
				}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: c.denied}}}}
			}
			return true, p, nil
		})
		g := newGlobals(IO{Out: &e.out, ErrOut: &e.errOut})
		g.poll = time.Millisecond
		g.log = discardLog()
		cfg, err := config.Parse("", nil)
		if err != nil {
			t.Fatal(err)
		}
		res := g.probeAndRecord(context.Background(), cfg, e.cluster.Client, "busybox:1")
		if res.Result != c.want {
			t.Errorf("denied exit %d: %+v, want %s", c.denied, res, c.want)
		}
		pods, _ := e.cluster.Core.CoreV1().Pods("agents").List(context.Background(), metav1.ListOptions{})
		nps, _ := e.cluster.Core.NetworkingV1().NetworkPolicies("agents").List(context.Background(), metav1.ListOptions{})
		if len(pods.Items) != 0 || len(nps.Items) != 0 {
			t.Errorf("probe left %d pods, %d policies", len(pods.Items), len(nps.Items))
		}
		if rec, err := readRecord(context.Background(), e.cluster.Client); err != nil || rec.Result != c.want {
			t.Errorf("record %+v, %v", rec, err)
		}
	}
}

// TestWithChangesTold: a profile's with_changes has no cluster form yet;
// a start says so instead of ignoring it. Control: without the key, no
// such line.
func TestWithChangesTold(t *testing.T) {
	for _, c := range []struct {
		key  string
		want bool
	}{{"with_changes = true\n", true}, {"", false}} {
		e := newEnv(t, plainCfg+"[profiles.dev]\nimage = \"agent:1\"\npersistent_dirs = []\n"+c.key)
		e.record(enforced)
		e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SandboxNotReady"})
		if code := e.run("exec", "dev", "--", "true"); code != 0 {
			t.Fatalf("%q: exit %d; %s", c.key, code, e.errOut.String())
		}
		if got := strings.Contains(e.errOut.String(), "with_changes is not carried into cluster sandboxes"); got != c.want {
			t.Errorf("%q: told %v, want %v; stderr %s", c.key, got, c.want, e.errOut.String())
		}
	}
}
