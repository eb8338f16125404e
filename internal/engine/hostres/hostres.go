// Package hostres is what this host gives a sandbox, and how each of a
// profile's resource limits is held on it (docs/SECURITY.md, "Resource
// limits"). The kernel's cgroup limits are not among the mechanisms: runsc
// runs rootless with --ignore-cgroups (ENVIRONMENT.md), so podman's
// --memory, --cpus and --pids-limit would be silent no-ops on every host.
// Each limit is held by a mechanism that works without cgroups, the same
// on cgroup v1 and v2 hosts.
package hostres

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/sched"
)

// Host is what this host gives.
type Host struct {
	// TotalRAM is MemTotal in bytes.
	TotalRAM uint64
	// CPUs are the CPUs this process may run on (its affinity).
	CPUs []int
}

// Probe reads this host's memory and CPUs.
func Probe() (Host, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return Host{}, fmt.Errorf("host memory: %w", err)
	}
	total, err := memTotal(data)
	if err != nil {
		return Host{}, err
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return Host{}, fmt.Errorf("host CPUs: %w", err)
	}
	h := Host{TotalRAM: total}
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			h.CPUs = append(h.CPUs, i)
		}
	}
	return h, nil
}

// memTotal reads MemTotal (kB) from /proc/meminfo's contents.
func memTotal(data []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err == nil && kb > 0 {
				return kb << 10, nil
			}
		}
	}
	return 0, fmt.Errorf("host memory: no MemTotal in /proc/meminfo")
}

// Mechanisms that hold each limit (doctor and status print them).
const (
	MemoryWatchdog = "lazaret's watchdog (the sandbox's memory file and its kernel's heap, every 50 ms): the largest process inside is killed at the limit, the sandbox stopped past it"
	CPUAffinity    = "CPU affinity of the sandbox's processes"
	CPUPriority    = "every core, at nice 10 and best-effort I/O level 7 below your own work"
	PidsRlimit     = "gVisor's RLIMIT_NPROC, per uid inside the sandbox"
	DiskWatchdog   = "lazaret's watchdog (free space of the data root's and the workspace's filesystems): the sandbox pauses below the reserve and resumes above it"
)

// The lower priority every sandbox runs at: below the user's own work
// (nice 0), so an agent burning every core leaves the desktop responsive.
const (
	SandboxNice    = 10
	SandboxIOLevel = 7 // best-effort class, lowest level
)

// Limit is one limit as held on this host.
type Limit struct {
	Name      string // the profile key
	Value     string
	Mechanism string
	// BestEffort is true when the limit is not held as written (limits =
	// "best-effort" let the sandbox start anyway).
	BestEffort bool
}

// Plan is how a profile's limits are held on a host.
type Plan struct {
	Memory      int64
	Pids        int
	DiskReserve config.DiskReserve
	Sched       sched.Sched
	Limits      []Limit
}

// Decide plans the resources r of profile on h. A limit h cannot hold is
// an error naming the key, unless r.BestEffort, which holds the nearest it
// can and says so.
func Decide(profile string, r config.Resources, h Host) (Plan, error) {
	p := Plan{
		Memory:      r.MemoryOn(h.TotalRAM),
		Pids:        r.Pids,
		DiskReserve: r.DiskReserve,
		Sched:       sched.Sched{Nice: SandboxNice, IOLevel: SandboxIOLevel},
	}
	if p.Pids <= 0 {
		p.Pids = config.DefaultPids
	}
	mem := config.FormatSize(p.Memory)
	if r.Memory == 0 {
		mem += " (40% of the host's RAM)"
	}
	p.Limits = append(p.Limits, Limit{Name: "memory", Value: mem, Mechanism: MemoryWatchdog})

	cpu := Limit{Name: "cpus", Value: "no bound", Mechanism: CPUPriority}
	if r.CPUs > 0 {
		n := int(math.Ceil(r.CPUs))
		cpu.Value = strconv.FormatFloat(r.CPUs, 'f', -1, 64)
		switch {
		case float64(n) != r.CPUs && !r.BestEffort:
			// Without a CPU controller only whole cores can be given.
			return Plan{}, &config.Error{Key: "profiles." + profile + ".cpus", Msg: fmt.Sprintf("cpus = %s: this host holds only whole cores (no cgroup CPU controller for a rootless runsc); use %d, or limits = \"best-effort\" for %d cores", cpu.Value, n, n)}
		case float64(n) != r.CPUs:
			cpu.BestEffort = true
			cpu.Value += fmt.Sprintf(" (held as %d cores)", n)
		}
		if n < len(h.CPUs) {
			// The last cores: the first ones are where interrupts and
			// most of the user's own work land.
			p.Sched.CPUs = append([]int(nil), h.CPUs[len(h.CPUs)-n:]...)
			cpu.Mechanism = CPUAffinity + " (" + sched.FormatCPUs(p.Sched.CPUs) + "), at nice 10"
		} else {
			cpu.Value += fmt.Sprintf(" (the host has %d)", len(h.CPUs))
		}
	}
	p.Limits = append(p.Limits, cpu)
	p.Limits = append(p.Limits, Limit{Name: "pids", Value: strconv.Itoa(p.Pids), Mechanism: PidsRlimit})
	p.Limits = append(p.Limits, Limit{Name: "disk_reserve", Value: p.DiskReserve.String(), Mechanism: DiskWatchdog})
	return p, nil
}

// Filesystem is the size and the space an unprivileged user may still use
// of the filesystem that holds path, or would hold it: its nearest
// existing ancestor's (a data root not made yet).
func Filesystem(path string) (total, free uint64, err error) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
		}
		if !errors.Is(err, unix.ENOENT) || p == filepath.Dir(p) {
			return 0, 0, err
		}
	}
}
