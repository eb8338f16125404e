package kubecli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
)

// The memory of a cluster sandbox when neither its profile, [cluster]
// nor [resources] sets one (docs/CONFIG.md, "On Kubernetes"): the share
// of the host's RAM a local sandbox gets (config.DefaultMemory) is unknown
// here (the template is the same on every node), so a bound that fits a
// build of a large project; its request is lower, so that a sandbox that is idle (a warm
// one) does not hold 8 GiB of a node.
const (
	clusterMemory        = "8Gi"
	clusterMemoryRequest = "1Gi"
)

// podLimits are the agent container's resources of a profile, and where
// each came from (doctor prints them).
type podLimits struct {
	CPU, CPURequest, Memory, MemoryRequest, EphemeralStorage string
	// Memory's, CPU's and EphemeralStorage's origin: a key
	// ("profiles.x.memory", "cluster.memory", "resources.memory"), or
	// "built-in default"; StorageFrom says why there is no limit when
	// EphemeralStorage is empty.
	MemoryFrom, CPUFrom, StorageFrom string
	// Warnings are limits of the profile that the pod does not hold
	// (limits = "best-effort").
	Warnings []string
}

// apply sets in's resources.
func (l podLimits) apply(in *kubespec.Input) {
	in.CPU, in.CPURequest, in.Memory, in.MemoryRequest = l.CPU, l.CPURequest, l.Memory, l.MemoryRequest
	in.EphemeralStorage = l.EphemeralStorage
}

// podResources maps p's resource keys onto its pod (docs/CONFIG.md, "On
// Kubernetes"). A key the profile sets itself wins over [cluster]'s
// cpu/memory, which win over [resources]' and the built-in defaults. An
// explicit cpu or memory is both request and limit (the scheduler
// reserves it, as [cluster] cpu/memory always did); the built-in memory
// requests less than its limit, and no cpus sets no CPU request or
// limit: the pod then has the lowest CPU weight on its node. The disk
// reserve becomes an ephemeral-storage limit of the smallest node's
// allocatable storage less the reserve on that node (nodes as
// kube.NodesStorage lists them, or nodesErr). pids has no pod field:
// a pids other than the built-in default is an error unless limits =
// "best-effort".
func podResources(cfg *config.Config, p *config.Profile, nodes []kube.NodeStorage, nodesErr error) (podLimits, error) {
	var l podLimits
	r, global := p.Resources, cfg.Resources
	// A value other than the global one is the profile's own (the
	// configuration keeps no other trace of it).
	switch {
	case r.Memory > 0 && r.Memory != global.Memory:
		l.Memory, l.MemoryFrom = bytesQuantity(r.Memory), profileKey(p, "memory")
	case cfg.Cluster.Memory != "":
		l.Memory, l.MemoryFrom = cfg.Cluster.Memory, "cluster.memory"
	case global.Memory > 0:
		l.Memory, l.MemoryFrom = bytesQuantity(global.Memory), "resources.memory"
	default:
		l.Memory, l.MemoryRequest, l.MemoryFrom = clusterMemory, clusterMemoryRequest, "built-in default"
	}
	switch {
	case r.CPUs > 0 && r.CPUs != global.CPUs:
		l.CPU, l.CPUFrom = cpuQuantity(r.CPUs), profileKey(p, "cpus")
	case cfg.Cluster.CPU != "":
		l.CPU, l.CPUFrom = cfg.Cluster.CPU, "cluster.cpu"
	case global.CPUs > 0:
		l.CPU, l.CPUFrom = cpuQuantity(global.CPUs), "resources.cpus"
	default:
		l.CPUFrom = "built-in default"
	}
	if r.Pids != config.DefaultPids {
		key := "resources.pids"
		if r.Pids != global.Pids {
			key = profileKey(p, "pids")
		}
		msg := fmt.Sprintf("pids %d is not enforced on Kubernetes (a pod has no such field; the node's podPidsLimit bounds the pod's host processes, gVisor's own limit its tasks)", r.Pids)
		if !r.BestEffort {
			return l, &config.Error{File: p.File(), Key: key, Msg: msg + `: remove it, or set limits = "best-effort" in the profile`}
		}
		l.Warnings = append(l.Warnings, key+": "+msg)
	}
	storage, from, err := ephemeralLimit(p, nodes, nodesErr)
	if err != nil {
		return l, err
	}
	l.EphemeralStorage, l.StorageFrom = storage, from
	return l, nil
}

// ephemeralLimit is the ephemeral-storage limit that keeps p's disk
// reserve free on every node listed: the smallest allocatable storage
// less the reserve of that node's filesystem, rounded down to a whole
// GiB (a MiB below 2 GiB) so that the template's content, and so its
// name, stays the same while the nodes do.
func ephemeralLimit(p *config.Profile, nodes []kube.NodeStorage, nodesErr error) (string, string, error) {
	d := p.Resources.DiskReserve
	from := "disk_reserve " + d.String()
	if nodesErr != nil {
		return "", "none: the nodes' storage is unknown (" + nodesErr.Error() + "); the kubelet's own eviction threshold keeps the node's disk", nil
	}
	if len(nodes) == 0 {
		return "", "none: no node reports its ephemeral storage; the kubelet's own eviction threshold keeps the node's disk", nil
	}
	best := int64(math.MaxInt64)
	for _, n := range nodes {
		if err := d.Check(uint64(n.Capacity)); err != nil {
			return "", "", fmt.Errorf("node %s: %w", n.Name, err)
		}
		free := n.Allocatable - int64(d.Of(uint64(n.Capacity)))
		if free <= 0 {
			return "", "", fmt.Errorf("disk_reserve %s leaves no ephemeral storage for a sandbox on node %s (%s allocatable of %s)",
				d, n.Name, config.FormatSize(n.Allocatable), config.FormatSize(n.Capacity))
		}
		best = min(best, free)
	}
	unit := int64(1 << 30)
	if best < 2<<30 {
		unit = 1 << 20
	}
	return bytesQuantity(best / unit * unit), from, nil
}

// profileKey is p's key name.
func profileKey(p *config.Profile, name string) string {
	return "profiles." + p.Name + "." + name
}

// bytesQuantity is b as a Kubernetes quantity ("8Gi", "1536Mi").
func bytesQuantity(b int64) string {
	return resource.NewQuantity(b, resource.BinarySI).String()
}

// cpuQuantity is c cores as a Kubernetes quantity ("2", "1500m").
func cpuQuantity(c float64) string {
	return resource.NewMilliQuantity(int64(math.Round(c*1000)), resource.DecimalSI).String()
}

// resourcesCheck is doctor's line of the agent container's resources of
// profile: each with the key it came from, WARN for a limit the pod does
// not hold, FAIL for one it cannot start with.
func resourcesCheck(ctx context.Context, cfg *config.Config, c *kube.Client, profile string) check {
	what := "resources of profile " + profile
	p, err := cfg.Profile(profile)
	if err != nil {
		return check{"WARN", what, "unknown: " + err.Error()}
	}
	nodes, nerr := c.NodesStorage(ctx)
	if nerr != nil && !errors.Is(nerr, kube.ErrForbidden) {
		return check{"WARN", what, "unknown: " + nerr.Error()}
	}
	l, err := podResources(cfg, p, nodes, nerr)
	if err != nil {
		return check{"FAIL", what, err.Error()}
	}
	mem := "memory " + l.Memory
	if l.MemoryRequest != "" {
		mem += " (request " + l.MemoryRequest + ")"
	}
	cpu := "cpu " + l.CPU
	if l.CPU == "" {
		cpu = "cpu unbounded at the lowest CPU weight of the node"
	}
	storage := "ephemeral-storage " + l.EphemeralStorage + " (" + l.StorageFrom + ")"
	status := "ok"
	if l.EphemeralStorage == "" {
		storage, status = "ephemeral-storage "+l.StorageFrom, "WARN"
	}
	parts := []string{mem + " (" + l.MemoryFrom + ")", cpu + " (" + l.CPUFrom + ")", storage,
		"pids: the node's podPidsLimit and gVisor's own task limit"}
	if len(l.Warnings) > 0 {
		status = "WARN"
		parts = append(parts, l.Warnings...)
	}
	return check{status, what, strings.Join(parts, "; ")}
}
