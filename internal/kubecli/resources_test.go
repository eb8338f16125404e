package kubecli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

const gib = int64(1) << 30

// nodes100 is one node of 100 GiB, 90 of them allocatable.
var nodes100 = []kube.NodeStorage{{Name: "n1", Capacity: 100 * gib, Allocatable: 90 * gib}}

func parseProfile(t *testing.T, doc string) (*config.Config, *config.Profile) {
	t.Helper()
	cfg, err := config.Parse("/c/config.toml", []byte("data_root = \"/tmp/lazaret-test-data\"\n"+doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, cfg.Profiles["pp"]
}

// TestPodResources: the profile's own key wins over [cluster]'s, which
// wins over [resources]' and the built-in defaults; explicit values are
// request and limit, the built-in memory requests less.
func TestPodResources(t *testing.T) {
	for _, c := range []struct {
		name, doc                         string
		cpu, cpuReq, mem, memReq, storage string
		memFrom, cpuFrom                  string
	}{
		{name: "built-in defaults", doc: "[profiles.pp]\nimage = \"a:1\"\n",
			mem: "8Gi", memReq: "1Gi", storage: "85Gi", memFrom: "built-in default", cpuFrom: "built-in default"},
		{name: "cluster keys as before", doc: "[cluster]\ncpu = \"500m\"\nmemory = \"4Gi\"\n[profiles.pp]\nimage = \"a:1\"\n",
			cpu: "500m", mem: "4Gi", storage: "85Gi", memFrom: "cluster.memory", cpuFrom: "cluster.cpu"},
		{name: "resources table", doc: "[resources]\nmemory = \"2g\"\ncpus = 1.5\n[profiles.pp]\nimage = \"a:1\"\n",
			cpu: "1500m", mem: "2Gi", storage: "85Gi", memFrom: "resources.memory", cpuFrom: "resources.cpus"},
		{name: "cluster over resources", doc: "[resources]\nmemory = \"2g\"\ncpus = 1.5\n[cluster]\ncpu = \"3\"\nmemory = \"6Gi\"\n[profiles.pp]\nimage = \"a:1\"\n",
			cpu: "3", mem: "6Gi", storage: "85Gi", memFrom: "cluster.memory", cpuFrom: "cluster.cpu"},
		{name: "profile over cluster", doc: "[resources]\nmemory = \"2g\"\n[cluster]\ncpu = \"3\"\nmemory = \"6Gi\"\n[profiles.pp]\nimage = \"a:1\"\nmemory = \"1.5g\"\ncpus = 2\n",
			cpu: "2", mem: "1536Mi", storage: "85Gi", memFrom: "profiles.pp.memory", cpuFrom: "profiles.pp.cpus"},
		{name: "byte reserve", doc: "[profiles.pp]\nimage = \"a:1\"\ndisk_reserve = \"20g\"\n",
			mem: "8Gi", memReq: "1Gi", storage: "70Gi", memFrom: "built-in default", cpuFrom: "built-in default"},
		{name: "percent reserve", doc: "[resources]\ndisk_reserve = \"30%\"\n[profiles.pp]\nimage = \"a:1\"\n",
			mem: "8Gi", memReq: "1Gi", storage: "60Gi", memFrom: "built-in default", cpuFrom: "built-in default"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, p := parseProfile(t, c.doc)
			l, err := podResources(cfg, p, nodes100, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%s/%s %s/%s %s %s %s", l.CPU, l.CPURequest, l.Memory, l.MemoryRequest, l.EphemeralStorage, l.MemoryFrom, l.CPUFrom)
			want := fmt.Sprintf("%s/%s %s/%s %s %s %s", c.cpu, c.cpuReq, c.mem, c.memReq, c.storage, c.memFrom, c.cpuFrom)
			if got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestPodResourcesStorage: the smallest node decides, a reserve a node
// cannot keep is an error, and unknown nodes mean no limit (said why).
func TestPodResourcesStorage(t *testing.T) {
	cfg, p := parseProfile(t, "[profiles.pp]\nimage = \"a:1\"\n")
	small := append([]kube.NodeStorage{{Name: "small", Capacity: 4 * gib, Allocatable: 3 * gib}}, nodes100...)
	l, err := podResources(cfg, p, small, nil)
	// 5% of 4 GiB is below the 1 GiB floor: 3 GiB - 1 GiB, in MiB.
	if err != nil || l.EphemeralStorage != "2Gi" {
		t.Errorf("smallest node: %q, %v", l.EphemeralStorage, err)
	}
	// Half of 1 GiB reserved leaves nothing of 512 MiB allocatable.
	l, err = podResources(cfg, p, []kube.NodeStorage{{Name: "tiny", Capacity: 1 * gib, Allocatable: gib / 2}}, nil)
	if err == nil || !strings.Contains(err.Error(), "disk_reserve 5% leaves no ephemeral storage") || !strings.Contains(err.Error(), "tiny") {
		t.Errorf("tiny node: %q, %v", l.EphemeralStorage, err)
	}
	_, p2 := parseProfile(t, "[profiles.pp]\nimage = \"a:1\"\ndisk_reserve = \"200g\"\n")
	if _, err := podResources(cfg, p2, nodes100, nil); err == nil || !strings.Contains(err.Error(), "disk_reserve 200g is larger than the filesystem") {
		t.Errorf("reserve above the node: %v", err)
	}
	for _, c := range []struct {
		nodes []kube.NodeStorage
		err   error
		want  string
	}{{nil, nil, "no node reports"}, {nil, fmt.Errorf("listing nodes: %w", kube.ErrForbidden), "forbidden"}} {
		l, err := podResources(cfg, p, c.nodes, c.err)
		if err != nil || l.EphemeralStorage != "" || !strings.Contains(l.StorageFrom, c.want) {
			t.Errorf("%v: %+v, %v", c.err, l, err)
		}
	}
}

// TestPodResourcesPids: a pids the pod cannot hold is an error naming its
// key, a warning with limits = "best-effort", nothing at the default.
func TestPodResourcesPids(t *testing.T) {
	cfg, p := parseProfile(t, "[profiles.pp]\nimage = \"a:1\"\npids = 100\n")
	_, err := podResources(cfg, p, nodes100, nil)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "profiles.pp.pids" || ce.File != "/c/config.toml" || !strings.Contains(ce.Msg, `limits = "best-effort"`) {
		t.Errorf("pids: %v", err)
	}
	cfg, p = parseProfile(t, "[resources]\npids = 100\n[profiles.pp]\nimage = \"a:1\"\n")
	if _, err := podResources(cfg, p, nodes100, nil); !errors.As(err, &ce) || ce.Key != "resources.pids" {
		t.Errorf("global pids: %v", err)
	}
	cfg, p = parseProfile(t, "[profiles.pp]\nimage = \"a:1\"\npids = 100\nlimits = \"best-effort\"\n")
	if l, err := podResources(cfg, p, nodes100, nil); err != nil || len(l.Warnings) != 1 || !strings.HasPrefix(l.Warnings[0], "profiles.pp.pids: pids 100 is not enforced") {
		t.Errorf("best-effort: %+v, %v", l, err)
	}
}

// TestStartAppliesResources: the template a start applies carries the
// profile's resources (and the seed container, as the agent); a user who
// may not list nodes still starts, without an ephemeral-storage limit
// and with a warning.
func TestStartAppliesResources(t *testing.T) {
	cfg := plainCfg + "[profiles.dev]\nimage = \"agent:1\"\nmemory = \"3g\"\ncpus = 1.5\npersistent_dirs = []\n"
	for _, forbid := range []bool{false, true} {
		e := newEnv(t, cfg)
		if forbid {
			e.cluster.Core.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("cluster-scoped"))
			})
		}
		e.record(enforced)
		e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SandboxNotReady"})
		if code := e.run("exec", "dev", "--", "true"); code != 0 {
			t.Fatalf("exit %d: %s", code, e.errOut.String())
		}
		ts, err := e.cluster.Client.Templates(context.Background(), "")
		if err != nil || len(ts) != 1 {
			t.Fatalf("templates %d, %v", len(ts), err)
		}
		r := ts[0].Spec.PodTemplate.Spec.Containers[0].Resources
		storage := r.Limits[corev1.ResourceEphemeralStorage]
		got := fmt.Sprintf("%s/%s %s/%s %s", r.Limits.Cpu(), r.Requests.Cpu(), r.Limits.Memory(), r.Requests.Memory(), storage.String())
		want := "1500m/1500m 3Gi/3Gi 85Gi"
		if forbid {
			want = "1500m/1500m 3Gi/3Gi 0"
		}
		if got != want {
			t.Errorf("forbid=%v: resources %s, want %s", forbid, got, want)
		}
		if warned := strings.Contains(e.errOut.String(), "no ephemeral-storage limit"); warned != forbid {
			t.Errorf("forbid=%v: warning %v: %s", forbid, warned, e.errOut.String())
		}
	}
}

// TestDoctorResources: doctor shows the profile's pod resources and
// where each came from; a pids the pod cannot hold fails.
func TestDoctorResources(t *testing.T) {
	e := newEnv(t, plainCfg+"[profiles.dev]\nimage = \"agent:1\"\ncpus = 2\n")
	doctorCluster(e, 3*time.Second, true)
	e.record(enforced)
	e.run("doctor", "--no-probe", "dev")
	wantLines(t, "doctor", e.out.String(), "ok    resources of profile dev: memory 8Gi (request 1Gi) (built-in default); cpu 2 (profiles.dev.cpus); ephemeral-storage 85Gi (disk_reserve 5%); pids: ")
	e = newEnv(t, plainCfg+"[profiles.dev]\nimage = \"agent:1\"\npids = 64\n")
	doctorCluster(e, 3*time.Second, true)
	e.record(enforced)
	if code := e.run("doctor", "--no-probe", "dev"); code == 0 {
		t.Error("doctor with a pids the pod cannot hold passed")
	}
	wantLines(t, "doctor", e.out.String(), "FAIL  resources of profile dev: ", "profiles.dev.pids: pids 64 is not enforced on Kubernetes")
}
