package kubecli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lazaret-dev/lazaret/internal/engine/attempt"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
)

const attemptsCfg = stateCfg + "[profiles.dev]\nimage = \"agent:1\"\npersistent_dirs = [\"/usr/local\"]\n"

// copyPods makes the fake cluster's copy pods end at once: the n-th pod
// created gets status(n) (nil: Succeeded, "copy 2048"). It returns the
// pods as created.
func (e *env) copyPods(status func(n int32) *corev1.PodStatus) *[]corev1.Pod {
	var made []corev1.Pod
	var n atomic.Int32
	e.cluster.Core.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		st := (*corev1.PodStatus)(nil)
		if status != nil {
			st = status(n.Add(1))
		}
		if st == nil {
			st = podEnded(corev1.PodSucceeded, "copy 2048\n")
		}
		p.Status = *st
		made = append(made, *p.DeepCopy())
		return false, nil, nil
	})
	return &made
}

func podEnded(phase corev1.PodPhase, msg string) *corev1.PodStatus {
	return &corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: kubespec.CopyContainer,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}}
}

// parentPVC puts the parent's (the profile's) PVC into the cluster, as a
// start made it.
func (e *env) parentPVC(class string) string {
	e.t.Helper()
	in := kubespec.StateInput{Profile: "dev", Size: "3Gi", StorageClass: class}
	p, err := kubespec.StatePVC(in)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.cluster.Client.EnsurePVC(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
	return p.Name
}

func (e *env) attemptAnchor(name string) *domain.Anchor {
	e.t.Helper()
	cfg, err := config.Load(e.cfgFile)
	if err != nil {
		e.t.Fatal(err)
	}
	rd, _ := domain.RuntimeDir()
	a, err := domain.New("dev", e.ws, cfg.DataRoot, rd, "")
	if err != nil {
		e.t.Fatal(err)
	}
	at, err := a.ForAttempt(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return at
}

func (e *env) pods() []corev1.Pod {
	l, err := e.cluster.Core.CoreV1().Pods("agents").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

// TestForkRunningParent: a fork of a running cluster sandbox syncs its
// commit to the host first; each attempt gets its branch at that commit,
// the parent's side branch under its own prefix, a PVC of its own (the
// parent's size and class, its attempt label) filled by a copy pod that
// mounts the parent's read-only and is gone afterwards, and its record,
// last. ls shows them; --attempt gives the attempt its own claim and a
// template mounting its PVC, with no warm pool; rm takes one and leaves
// the other.
func TestForkRunningParent(t *testing.T) {
	e := newEnv(t, attemptsCfg)
	e.ws = gittest.NewRepo(t)
	e.readyAfter(1, metav1.Condition{})
	pod := filepath.Join(t.TempDir(), "workspace")
	e.cluster.Exec.Run = podOnHost(t, pod)
	e.mustRun("exec", "dev", "--", "make")
	gittest.Git(t, pod, "branch", "side")
	gittest.Git(t, pod, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "before the fork")
	agent := gittest.Git(t, pod, "rev-parse", "HEAD")
	parent := kubespec.StateName("dev", "")
	made := e.copyPods(nil)

	e.mustRun("fork", "dev", "try", "-n", "2")
	wantLines(t, "fork", e.out.String(), "attempt try-1: branch lazaret/agent-dev.try-1 at "+agent[:12]+"; persistent dirs copied (copy, 2m)", "attempt try-2: branch lazaret/agent-dev.try-2")
	if len(*made) != 2 || len(e.pods()) != 0 {
		t.Fatalf("copy pods %d made, %d left", len(*made), len(e.pods()))
	}
	for i, name := range []string{"try-1", "try-2"} {
		a := e.attemptAnchor(name)
		m := gitrepo.RefMapOf(a)
		if got := gittest.Git(t, e.ws, "rev-parse", m.AgentRef()); got != agent {
			t.Errorf("%s at %s, want the parent's synced %s", m.AgentRef(), got, agent)
		}
		gittest.Git(t, e.ws, "rev-parse", "--verify", m.SideRefPrefix()+"side")
		pvc, ok := e.pvcs()[kubespec.StateName("dev", a.Hash)]
		if !ok || pvc.Labels[kubespec.LabelAttempt] != name || *pvc.Spec.StorageClassName != "fast" || pvc.Spec.DataSource != nil {
			t.Errorf("PVC of %s: %+v", name, pvc)
		}
		if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "2Gi" {
			t.Errorf("size %s, want the parent's", q.String())
		}
		p := (*made)[i].Spec
		if p.Volumes[0].PersistentVolumeClaim.ClaimName != parent || !p.Volumes[0].PersistentVolumeClaim.ReadOnly || p.Volumes[1].PersistentVolumeClaim.ClaimName != pvc.Name {
			t.Errorf("copy pod volumes %+v", p.Volumes)
		}
		r, err := attempt.Read(a)
		if err != nil || r.Backend != attempt.BackendKubernetes || r.State != "copy" || r.StateBytes != 2048<<10 || !r.Running || r.Base != agent {
			t.Errorf("record %+v %v", r, err)
		}
	}
	if _, ok := e.pvcs()[parent]; !ok {
		t.Fatal("the parent's PVC went")
	}

	e.mustRun("attempts", "dev")
	wantLines(t, "attempts", e.out.String(), "try-1", "try-2", "lazaret/agent-dev.try-1", "2m", agent[:12]+" before the fork")

	e.mustRun("--attempt", "try-2", "exec", "dev", "--", "true")
	a2 := e.attemptAnchor("try-2")
	cl, err := e.cluster.Client.Claim(context.Background(), kubespec.ClaimName(a2.Hash))
	if err != nil || cl.Labels[kubespec.LabelAttempt] != "try-2" {
		t.Fatalf("the attempt's claim: %+v %v", cl, err)
	}
	pools, _ := e.cluster.Client.WarmPools(context.Background(), "")
	for _, p := range pools {
		if p.Name == cl.Spec.WarmPoolRef.Name && *p.Spec.Replicas != 0 {
			t.Errorf("the attempt's pool has %d replicas", *p.Spec.Replicas)
		}
	}
	ts, _ := e.cluster.Client.Templates(context.Background(), "")
	mounts := ""
	for _, tpl := range ts {
		if tpl.Name == cl.Spec.WarmPoolRef.Name {
			for _, v := range tpl.Spec.PodTemplate.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					mounts += v.PersistentVolumeClaim.ClaimName
				}
			}
		}
	}
	if mounts != kubespec.StateName("dev", a2.Hash) {
		t.Errorf("the attempt's template mounts %q", mounts)
	}
	if got := gittest.Git(t, pod, "branch", "--show-current"); got != "lazaret/agent-dev" {
		t.Logf("(the fake pods share one clone: %s)", got)
	}

	e.mustRun("attempts", "rm", "dev", "try-1")
	wantLines(t, "attempts rm", e.out.String(), "removed attempt try-1; branch lazaret/agent-dev.try-1 deleted (was "+agent[:12])
	a1 := e.attemptAnchor("try-1")
	if _, ok := e.pvcs()[kubespec.StateName("dev", a1.Hash)]; ok {
		t.Error("rm kept the PVC")
	}
	if _, err := os.Stat(a1.Root()); err == nil {
		t.Error("rm kept the Domain Root")
	}
	if out := gittest.Git(t, e.ws, "for-each-ref", "refs/heads/lazaret/agent-dev.try-1", "refs/lazaret/dev.try-1"); out != "" {
		t.Errorf("rm kept refs %s", out)
	}
	if _, err := attempt.Read(a2); err != nil {
		t.Errorf("rm of try-1 took try-2: %v", err)
	}
	if _, ok := e.pvcs()[kubespec.StateName("dev", a2.Hash)]; !ok {
		t.Error("rm of try-1 took try-2's PVC")
	}
	gittest.Git(t, e.ws, "rev-parse", "--verify", "refs/heads/lazaret/agent-dev.try-2")
}

// TestForkRollback: a copy that fails undoes the whole fork (the PVCs,
// the branches, no record, no pod), with one line naming the cause, the
// pod's text escaped.
func TestForkRollback(t *testing.T) {
	e := newEnv(t, attemptsCfg)
	e.ws = gittest.NewRepo(t)
	e.parentPVC("fast")
	e.copyPods(func(n int32) *corev1.PodStatus {
		if n == 2 {
			return podEnded(corev1.PodFailed, "cp: cannot open 'x\x1b[31m': Permission denied\n")
		}
		return nil
	})
	code := e.run("fork", "dev", "try", "-n", "3")
	msg := e.errOut.String()
	if code == 0 || !strings.Contains(msg, "copying the persistent dirs failed (pod lazaret-fork-") || !strings.Contains(msg, "): cp: cannot open") || strings.Contains(msg, "\x1b") || strings.Count(strings.TrimSpace(msg), "\n") > 1 {
		t.Fatalf("exit %d: %q", code, msg)
	}
	if len(e.pvcs()) != 1 || len(e.pods()) != 0 {
		t.Errorf("left: PVCs %v, pods %d", e.pvcs(), len(e.pods()))
	}
	if out := gittest.Git(t, e.ws, "for-each-ref", "refs/heads/lazaret", "refs/lazaret"); out != "" {
		t.Errorf("left refs %s", out)
	}
	for _, n := range []string{"try-1", "try-2", "try-3"} {
		if _, err := os.Stat(e.attemptAnchor(n).Root()); err == nil {
			t.Errorf("left %s's Domain Root", n)
		}
	}
}

// TestForkBadInput: an invalid name, -n over [attempts] max (counting
// the attempts there are), an attempt that exists, an unknown --attempt:
// one line, exit 2, nothing made.
func TestForkBadInput(t *testing.T) {
	e := newEnv(t, attemptsCfg+"[attempts]\nmax = 3\n")
	e.ws = gittest.NewRepo(t)
	e.parentPVC("fast")
	e.copyPods(nil)
	e.mustRun("fork", "dev", "one")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fork", "dev", "Bad_Name"}, `attempt name "Bad_Name"`},
		{[]string{"fork", "dev", "try", "-n", "3"}, "over [attempts] max = 3"},
		{[]string{"fork", "dev", "one"}, `attempt "one" of profile dev already exists`},
		{[]string{"--attempt", "nope", "exec", "dev", "--", "true"}, "lazaret --backend kubernetes attempts"},
		{[]string{"--attempt", "one", "fork", "dev", "two"}, "--attempt"},
	} {
		pvcs := len(e.pvcs())
		code := e.run(c.args...)
		if msg := e.errOut.String(); code != 2 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, msg)
		}
		if len(e.pvcs()) != pvcs || len(e.claims()) != 0 {
			t.Errorf("%v made something: %v", c.args, e.pvcs())
		}
	}
	if out := gittest.Git(t, e.ws, "for-each-ref", "--format=%(refname)", "refs/heads/lazaret"); out != "refs/heads/lazaret/agent-dev.one" {
		t.Errorf("refs %q", out)
	}
}

// TestForkClone: on a class whose provisioner is a registered CSI driver
// the attempt's PVC is a clone of the parent's (dataSource), and the copy
// pod that found it complete says so.
func TestForkClone(t *testing.T) {
	e := newEnv(t, attemptsCfg)
	e.parentPVC("csi")
	ctx := context.Background()
	if _, err := e.cluster.Core.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi"}, Provisioner: "csi.example.com"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cluster.Core.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.copyPods(func(int32) *corev1.PodStatus { return podEnded(corev1.PodSucceeded, "clone 4") })
	e.mustRun("fork", "dev", "c")
	wantLines(t, "fork", e.out.String(), "persistent dirs copied (clone, 4k)")
	p := e.pvcs()[kubespec.StateName("dev", e.attemptAnchor("c").Hash)]
	if p.Spec.DataSource == nil || p.Spec.DataSource.Name != kubespec.StateName("dev", "") {
		t.Errorf("PVC %+v", p.Spec)
	}
	e.mustRun("fork", "--no-clone", "dev", "d")
	if p := e.pvcs()[kubespec.StateName("dev", e.attemptAnchor("d").Hash)]; p.Spec.DataSource != nil {
		t.Errorf("--no-clone: PVC %+v", p.Spec)
	}
}

// TestAttemptsKeep: keep copies the attempt's PVC back over the
// profile's (replace mode), refused while the attempt or the workspace's
// sandbox runs; an attempt's claim does not hold the profile's PVC
// (another workspace's start goes).
func TestAttemptsKeep(t *testing.T) {
	e := newEnv(t, attemptsCfg)
	parent := e.parentPVC("fast")
	made := e.copyPods(nil)
	e.mustRun("fork", "dev", "k")
	a := e.attemptAnchor("k")
	ac := kubespec.Claim(kubespec.ClaimInput{Profile: "dev", DomainHash: a.Hash, Workspace: e.ws, WarmPool: "pool", Attempt: "k"})
	if _, _, err := e.cluster.Client.CreateClaim(context.Background(), ac); err != nil {
		t.Fatal(err)
	}
	if code := e.run("attempts", "keep", "dev", "k"); code != 5 || !strings.Contains(e.errOut.String(), "running") {
		t.Fatalf("keep of a running attempt: exit %d %s", code, e.errOut.String())
	}
	// Attempt claims are not the profile's PVC's users: the workspace's
	// own start is not refused by them.
	c := kubespec.Claim(kubespec.ClaimInput{Profile: "dev", DomainHash: "aaaaaaaaaaaa", Workspace: "/other", WarmPool: "p", Attempt: "x"})
	if _, _, err := e.cluster.Client.CreateClaim(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	e.readyAfter(1, metav1.Condition{})
	e.mustRun("exec", "dev", "--", "true")
	e.mustRun("--attempt", "k", "stop", "dev")
	if code := e.run("attempts", "keep", "dev", "k"); code != 5 || !strings.Contains(e.errOut.String(), "runs (claim lazaret-"+e.hash("dev")) {
		t.Fatalf("keep while the workspace's sandbox runs: exit %d %s", code, e.errOut.String())
	}
	e.mustRun("stop", "dev")
	e.mustRun("attempts", "keep", "dev", "k")
	last := (*made)[len(*made)-1]
	if last.Labels[kubespec.LabelCopy] != "keep" || last.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != kubespec.StateName("dev", a.Hash) ||
		last.Spec.Volumes[1].PersistentVolumeClaim.ClaimName != parent || !strings.Contains(strings.Join(last.Spec.Containers[0].Command, " "), " replace ") {
		t.Errorf("keep's pod %+v", last.Spec)
	}
}

// TestAttemptOwnSecrets: an attempt's sandbox gets placeholders and an
// interception CA of its own (not its parent's), kept across its own
// starts.
func TestAttemptOwnSecrets(t *testing.T) {
	e := secretsEnv(t, "Bearer {value}")
	e.startWith(kubeSecretValue)
	parent := placeholderOf(t, e.template())
	e.mustRun("fork", "dev", "s")
	t.Setenv("LZT_KUBE_SECRET", kubeSecretValue) // the fetch takes it out
	e.mustRun("--attempt", "s", "exec", "dev", "--", "true")
	ts, err := e.cluster.Client.Templates(context.Background(), "")
	if err != nil || len(ts) != 2 {
		t.Fatalf("templates %d %v", len(ts), err)
	}
	var mine string
	for i := range ts {
		if ph := placeholderOf(t, &ts[i]); ph != parent {
			mine = ph
		}
	}
	if mine == "" {
		t.Fatal("the attempt's sandbox has its parent's placeholder")
	}
	t.Setenv("LZT_KUBE_SECRET", kubeSecretValue)
	e.mustRun("--attempt", "s", "exec", "dev", "--", "true")
	if ts, _ := e.cluster.Client.Templates(context.Background(), ""); len(ts) != 2 {
		t.Errorf("the attempt's second start made a new template (%d)", len(ts))
	}
}

// TestReviewedAttempts: the attempts a review verb names (synced before
// the local CLI runs it), with or without a profile, flags after them.
func TestReviewedAttempts(t *testing.T) {
	for _, c := range []struct {
		verb    string
		args    []string
		profile string
		names   string
	}{
		{"diff", []string{"a", "b"}, "", "a b"},
		{"diff", []string{"dev", "a", "b", "--stat"}, "dev", "a b"},
		{"merge", []string{"a", "--squash"}, "", "a"},
		{"merge", []string{"dev", "a"}, "dev", "a"},
		{"diff", []string{"a"}, "", ""},
	} {
		p, names := reviewedAttempts(c.verb, c.args)
		if p != c.profile || strings.Join(names, " ") != c.names {
			t.Errorf("%s %q: %q %q", c.verb, c.args, p, names)
		}
	}
}

// TestForkCountAndNamespace: on lazaret-kube -n is fork's count, as in
// the local CLI, and --namespace still names the namespace there; ps
// shows an attempt's claim as such.
func TestForkCountAndNamespace(t *testing.T) {
	e := newEnv(t, attemptsCfg)
	e.parentPVC("fast")
	e.copyPods(nil)
	e.mustRun("fork", "--namespace", "agents", "dev", "n", "-n", "2")
	wantLines(t, "fork", e.out.String(), "attempt n-1:", "attempt n-2:")
	if code := e.run("fork", "--namespace", "Bad_NS", "dev", "m"); code != 2 || !strings.Contains(e.errOut.String(), "--namespace") {
		t.Errorf("fork --namespace is not the namespace: exit %d %s", code, e.errOut.String())
	}
	c := kubespec.Claim(kubespec.ClaimInput{Profile: "dev", DomainHash: e.attemptAnchor("n-1").Hash, Workspace: e.ws, WarmPool: "p", Attempt: "n-1"})
	if _, _, err := e.cluster.Client.CreateClaim(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	e.mustRun("ps")
	wantLines(t, "ps", e.out.String(), e.ws+" (attempt n-1)")
}

// TestForkCopyTimesOut: a copy pod that never ends (its volume never
// bound) fails the fork after --timeout, naming the volume claim, with
// everything undone.
func TestForkCopyTimesOut(t *testing.T) {
	e := newEnv(t, attemptsCfg)
	e.parentPVC("fast")
	code := e.run("fork", "--timeout", "100ms", "dev", "slow")
	if msg := e.errOut.String(); code != 3 || !strings.Contains(msg, "did not finish within 100ms: volume claim lazaret-state-") {
		t.Fatalf("exit %d: %s", code, msg)
	}
	if len(e.pvcs()) != 1 || len(e.pods()) != 0 {
		t.Errorf("left: PVCs %v, pods %d", e.pvcs(), len(e.pods()))
	}
	if _, err := os.Stat(e.attemptAnchor("slow").Root()); err == nil {
		t.Error("left the attempt's Domain Root")
	}
}
