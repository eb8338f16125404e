package kubecli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
)

func (e *env) pvcs() map[string]corev1.PersistentVolumeClaim {
	e.t.Helper()
	l, err := e.cluster.Client.PVCs(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]corev1.PersistentVolumeClaim{}
	for _, p := range l {
		out[p.Name] = p
	}
	return out
}

func (e *env) mustRun(args ...string) {
	e.t.Helper()
	if code := e.run(args...); code != 0 {
		e.t.Fatalf("%v: exit %d; %s", args, code, e.errOut.String())
	}
}

const stateCfg = plainCfg + "allow_unenforced_egress = true\nstorage_class = \"fast\"\nstate_size = \"2Gi\"\n"

// TestStatePVCLifecycle: a profile's PVC is made at its first start,
// found again by the next, mounted by the template, kept by stop and
// deleted by stop --purge.
func TestStatePVCLifecycle(t *testing.T) {
	e := newEnv(t, stateCfg+"[profiles.dev]\nimage = \"agent:1\"\npersistent_dirs = [\"/usr/local\", \"/opt\"]\n")
	e.readyAfter(1, metav1.Condition{})
	e.mustRun("exec", "dev", "--", "true")
	name := kubespec.StateName("dev", "")
	p, ok := e.pvcs()[name]
	if !ok || len(e.pvcs()) != 1 {
		t.Fatalf("PVCs %v, want %s", e.pvcs(), name)
	}
	if p.Spec.StorageClassName == nil || *p.Spec.StorageClassName != "fast" || p.Labels[kubespec.LabelStateScope] != "profile" || len(p.OwnerReferences) != 0 {
		t.Errorf("PVC %+v", p)
	}
	if q := p.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "2Gi" {
		t.Errorf("size %s", q.String())
	}
	ts, _ := e.cluster.Client.Templates(context.Background(), "")
	pod := ts[0].Spec.PodTemplate.Spec
	mounted := false
	for _, v := range pod.Volumes {
		mounted = mounted || v.Name == kubespec.StateVolume && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name
	}
	if pod.InitContainers[0].Name != kubespec.SeedContainer || !mounted {
		t.Errorf("template does not mount %s: %+v", name, pod.Volumes)
	}
	e.mustRun("stop", "dev")
	e.mustRun("exec", "dev", "--", "true")
	e.mustRun("stop", "dev")
	if _, ok := e.pvcs()[name]; !ok {
		t.Fatal("stop deleted the persistent dirs")
	}
	e.mustRun("stop", "--purge", "dev")
	if len(e.pvcs()) != 0 || !strings.Contains(e.out.String(), "purged persistent dirs "+name) {
		t.Fatalf("after purge: %v; %s", e.pvcs(), e.out.String())
	}
}

// TestStateWorkspaceScope: persist = "workspace" gives each Domain
// Anchor its own PVC (and template); stop --purge deletes this
// workspace's only.
func TestStateWorkspaceScope(t *testing.T) {
	e := newEnv(t, stateCfg+"[profiles.dev]\nimage = \"agent:1\"\npersist = \"workspace\"\n")
	e.readyAfter(1, metav1.Condition{})
	other, _ := kubespec.StatePVC(kubespec.StateInput{Profile: "dev", DomainHash: "0123456789ab", Workspace: "/other", Size: "1Gi"})
	if _, _, err := e.cluster.Client.EnsurePVC(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	e.mustRun("exec", "dev", "--", "true")
	mine := kubespec.StateName("dev", e.hash("dev"))
	if p, ok := e.pvcs()[mine]; !ok || p.Labels[kubespec.LabelDomain] != e.hash("dev") || p.Annotations[kubespec.AnnotationWorkspace] != e.ws {
		t.Fatalf("PVCs %v, want %s", e.pvcs(), mine)
	}
	pools, _ := e.cluster.Client.WarmPools(context.Background(), "")
	if len(pools) != 1 || *pools[0].Spec.Replicas != 0 {
		t.Errorf("pools %+v: want one of zero replicas", pools)
	}
	e.mustRun("stop", "--purge", "dev")
	if got := e.pvcs(); len(got) != 1 || got[other.Name].Name == "" {
		t.Fatalf("after purge: %v, want only %s", got, other.Name)
	}
	// --all --purge takes every unused one.
	e.mustRun("stop", "--all", "--purge")
	if len(e.pvcs()) != 0 {
		t.Errorf("after --all --purge: %v", e.pvcs())
	}
}

// TestStateSharedInUse: a profile's PVC serves one workspace at a time:
// a start is refused (exit 5, one line naming the other workspace) while
// another workspace's claim exists, and purge keeps a PVC a claim uses.
// Control: with persist = "workspace" the same start goes.
func TestStateSharedInUse(t *testing.T) {
	e := newEnv(t, stateCfg+"[profiles.dev]\nimage = \"agent:1\"\n")
	e.readyAfter(1, metav1.Condition{})
	e.addClaim("dev", "aaaaaaaaaaaa", "/other/ws", "pool")
	code := e.run("exec", "dev", "--", "true")
	msg := e.errOut.String()
	if code != 5 || !strings.Contains(msg, "used by the sandbox of /other/ws (claim lazaret-aaaaaaaaaaaa)") || !strings.Contains(msg, "persist = \"workspace\"") {
		t.Fatalf("exit %d: %s", code, msg)
	}
	if len(e.claims()) != 1 {
		t.Error("a refused start made a claim")
	}
	shared, _ := kubespec.StatePVC(kubespec.StateInput{Profile: "dev", Size: "1Gi"})
	if _, _, err := e.cluster.Client.EnsurePVC(context.Background(), shared); err != nil {
		t.Fatal(err)
	}
	e.mustRun("stop", "--purge", "dev")
	if _, ok := e.pvcs()[shared.Name]; !ok || !strings.Contains(e.out.String(), "kept persistent dirs "+shared.Name+": used by lazaret-aaaaaaaaaaaa") {
		t.Errorf("purge deleted a PVC in use: %s", e.out.String())
	}

	w := newEnv(t, stateCfg+"[profiles.dev]\nimage = \"agent:1\"\npersist = \"workspace\"\n")
	w.readyAfter(1, metav1.Condition{})
	w.addClaim("dev", "aaaaaaaaaaaa", "/other/ws", "pool")
	w.mustRun("exec", "dev", "--", "true")
}

// TestStateKeptOnFailedStart: a start that times out deletes its claim
// but keeps the PVC (the user's data), and says the PVC is not bound.
func TestStateKeptOnFailedStart(t *testing.T) {
	e := newEnv(t, stateCfg+"[profiles.dev]\nimage = \"agent:1\"\n")
	e.readyAfter(0, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending"})
	if code := e.run("exec", "--timeout", "50ms", "dev", "--", "true"); code != 3 {
		t.Fatalf("exit %d: %s", code, e.errOut.String())
	}
	name := kubespec.StateName("dev", "")
	if msg := e.errOut.String(); !strings.Contains(msg, "volume claim "+name+" is not bound") || !strings.Contains(msg, "storage_class") {
		t.Errorf("message %q", msg)
	}
	if len(e.claims()) != 0 {
		t.Error("the claim stayed")
	}
	if _, ok := e.pvcs()[name]; !ok {
		t.Error("a failed start deleted the persistent dirs")
	}
}

// TestStateNone: a profile without persistent dirs gets no PVC and no
// seed container.
func TestStateNone(t *testing.T) {
	e := newEnv(t, stateCfg+"[profiles.dev]\nimage = \"agent:1\"\npersistent_dirs = []\n")
	e.readyAfter(1, metav1.Condition{})
	e.mustRun("exec", "dev", "--", "true")
	ts, _ := e.cluster.Client.Templates(context.Background(), "")
	for _, c := range ts[0].Spec.PodTemplate.Spec.InitContainers {
		if c.Name == kubespec.SeedContainer {
			t.Error("a seed container without persistent dirs")
		}
	}
	if len(e.pvcs()) != 0 {
		t.Errorf("PVCs %v", e.pvcs())
	}
}

// TestStateVerb: `state` names the PVC; `state reset` wants --yes without
// a terminal, refuses while a sandbox uses the PVC and refuses DIR, then
// deletes it.
func TestStateVerb(t *testing.T) {
	e := newEnv(t, stateCfg+"[profiles.dev]\nimage = \"agent:1\"\npersistent_dirs = [\"/usr\"]\n")
	e.readyAfter(1, metav1.Condition{})
	e.mustRun("state", "dev")
	wantLines(t, "state", e.out.String(), "not made yet")
	e.mustRun("exec", "dev", "--", "true")
	name := kubespec.StateName("dev", "")
	e.mustRun("state", "dev")
	wantLines(t, "state", e.out.String(), name, "fast", "2Gi", "/usr", "profile")
	if code := e.run("state", "reset", "dev", "--yes"); code != 5 || !strings.Contains(e.errOut.String(), "in use by lazaret-"+e.hash("dev")) {
		t.Fatalf("reset while running: %d %s", code, e.errOut.String())
	}
	e.mustRun("stop", "dev")
	if code := e.run("state", "reset", "dev", "/usr"); code != 2 || !strings.Contains(e.errOut.String(), "DIR: ") {
		t.Errorf("reset DIR: %d %s", code, e.errOut.String())
	}
	if code := e.run("state", "reset", "dev"); code != 2 || !strings.Contains(e.errOut.String(), "--yes is required") {
		t.Errorf("reset without --yes: %d %s", code, e.errOut.String())
	}
	if _, ok := e.pvcs()[name]; !ok {
		t.Fatal("an unconfirmed reset deleted the PVC")
	}
	e.mustRun("state", "reset", "dev", "--yes")
	if len(e.pvcs()) != 0 {
		t.Errorf("after reset: %v", e.pvcs())
	}
}

// TestDoctorStorage: doctor names the class the PVCs will use, and says
// when there is none.
func TestDoctorStorage(t *testing.T) {
	e := newEnv(t, plainCfg)
	doctorCluster(e, 3*time.Second, true)
	e.record(enforced)
	e.run("doctor", "--no-probe")
	wantLines(t, "doctor", e.out.String(), "WARN  storage class: the cluster has no default StorageClass")
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "std", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "pd.csi.storage.gke.io"}
	if _, err := e.cluster.Core.StorageV1().StorageClasses().Create(context.Background(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustRun("doctor", "--no-probe")
	wantLines(t, "doctor", e.out.String(), "ok    storage class: default std, provisioner pd.csi.storage.gke.io")
	e = newEnv(t, plainCfg+"storage_class = \"fast\"\n")
	doctorCluster(e, 3*time.Second, true)
	e.record(enforced)
	if code := e.run("doctor", "--no-probe"); code != 3 {
		t.Errorf("doctor with a missing class: %d", code)
	}
	wantLines(t, "doctor", e.out.String(), "FAIL  storage class fast: not in the cluster")
}

// TestStatePurgeOddLabels: a state PVC whose labels lazaret did not write
// (they go into a label selector) is kept; control: the same PVC with
// lazaret's labels is purged.
func TestStatePurgeOddLabels(t *testing.T) {
	e := newEnv(t, stateCfg)
	ctx := context.Background()
	for i, labels := range []map[string]string{
		{kubespec.LabelStateScope: "workspace", kubespec.LabelDomain: "0123456789AB", kubespec.LabelProfile: "dev"},
		{kubespec.LabelStateScope: "profile", kubespec.LabelProfile: "x,y"},
		{kubespec.LabelStateScope: "workspace", kubespec.LabelDomain: "0123456789ab", kubespec.LabelProfile: "dev"},
	} {
		p, _ := kubespec.StatePVC(kubespec.StateInput{Profile: "dev", Size: "1Gi"})
		p.Name = fmt.Sprintf("lazaret-state-odd-%d", i)
		for k, v := range labels {
			p.Labels[k] = v
		}
		if _, err := e.cluster.Core.CoreV1().PersistentVolumeClaims("agents").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.mustRun("stop", "--all", "--purge")
	got := e.pvcs()
	if _, ok := got["lazaret-state-odd-2"]; ok || len(got) != 2 {
		t.Errorf("after purge: %v, want the two odd ones kept and the control purged", got)
	}
}
