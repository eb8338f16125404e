package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Resources are what one sandbox may use of the host: the profile keys
// memory, cpus, pids, disk_reserve and limits, each defaulting to the
// global [resources] table's, which defaults to the built-in values below
// (docs/CONFIG.md, "Resource limits"; docs/SECURITY.md says how each is
// enforced).
type Resources struct {
	// Memory bounds the sandbox's memory in bytes (its processes, its
	// kernel's own, and its tmpfs mounts); 0 means DefaultMemory of the
	// host the sandbox runs on (40% of its RAM).
	Memory int64
	// CPUs bounds the cores the sandbox may keep busy; 0 means no bound
	// (every core, at a lower priority than the user's own work).
	CPUs float64
	// Pids bounds the sandbox's tasks.
	Pids int
	// DiskReserve is the free space kept on each host filesystem the
	// sandbox writes (the data root's, the workspace's).
	DiskReserve DiskReserve
	// BestEffort (limits = "best-effort") starts a sandbox whose limits
	// this host cannot enforce; otherwise that is an error at start.
	BestEffort bool
}

// Built-in resource defaults: a sandbox with no configuration cannot make
// the host unusable (docs/CONFIG.md says why each).
const (
	// DefaultPids: enough for a parallel build (make -j, node worker
	// pools), low enough that a fork bomb stops long before the host's
	// own limit.
	DefaultPids = 4096
	// MinMemory: below it the sandbox's own kernel (about 60 MiB) leaves
	// too little to run a shell and git.
	MinMemory = 128 << 20
	// MaxPids bounds pids (the kernel's own maximum, pid_max).
	MaxPids = 1 << 22
	// MinPids: the sandbox's init, a shell and lazaret's own helpers.
	MinPids = 16
	// MaxCPUs bounds cpus.
	MaxCPUs = 1024
	// LimitsEnforced and LimitsBestEffort are the values of limits.
	LimitsEnforced   = "enforced"
	LimitsBestEffort = "best-effort"
)

// DefaultDiskReserve is 5% of the filesystem, and never less than
// DiskReserveFloor: enough for the user's editor, shell history and a
// package upgrade when the agent fills the disk.
var DefaultDiskReserve = DiskReserve{Percent: 5}

// DiskReserveFloor is the least a percentage reserve keeps (capped at
// half of a filesystem smaller than twice it).
const DiskReserveFloor = 1 << 30

// DefaultMemory is the default memory bound on a host with totalRAM bytes:
// 40% of it. The user's own work keeps the rest, with room for the
// limit's margin, the page cache and the sandbox's kernel: measured, an
// agent stopped at half the RAM left the host 45.7% available, too close
// to the half a user expects to keep.
func DefaultMemory(totalRAM uint64) int64 {
	m := int64(totalRAM / 5 * 2)
	return max(m, MinMemory)
}

// MemoryOn is the memory bound of r on a host with totalRAM bytes.
func (r Resources) MemoryOn(totalRAM uint64) int64 {
	if r.Memory > 0 {
		return r.Memory
	}
	return DefaultMemory(totalRAM)
}

// DiskReserve is free space to keep: Bytes, or Percent of the filesystem.
type DiskReserve struct {
	Bytes   int64
	Percent float64
}

// String is the reserve as the configuration writes it.
func (d DiskReserve) String() string {
	if d.Percent > 0 {
		return strconv.FormatFloat(d.Percent, 'f', -1, 64) + "%"
	}
	return FormatSize(d.Bytes)
}

// Of is the reserve in bytes on a filesystem of total bytes. A percentage
// keeps at least DiskReserveFloor, but never more than half the disk.
func (d DiskReserve) Of(total uint64) uint64 {
	if d.Percent <= 0 {
		return uint64(d.Bytes)
	}
	r := uint64(float64(total) * d.Percent / 100)
	if r < DiskReserveFloor {
		r = min(uint64(DiskReserveFloor), total/2)
	}
	return r
}

// Check reports a reserve that the filesystem of total bytes cannot keep
// (one at least its whole size).
func (d DiskReserve) Check(total uint64) error {
	if r := d.Of(total); r >= total {
		return ruleErrf("disk_reserve %s is larger than the filesystem (%s)", d, FormatSize(int64(total)))
	}
	return nil
}

// FormatSize prints bytes in the largest binary unit that keeps one
// decimal: "512m", "1.5g".
func FormatSize(b int64) string {
	units := []struct {
		suffix string
		size   int64
	}{{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}}
	for _, u := range units {
		if b >= u.size {
			v := float64(b) / float64(u.size)
			return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}

// ParseSize reads a size such as "8g", "512m", "512MiB", "4Gi" or "1.5g"
// (binary units; a bare number is bytes).
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	t = strings.TrimSuffix(t, "i")
	mult := float64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	if t == "" || strings.ContainsAny(t, "+-eEx_ ") {
		return 0, fmt.Errorf("not a size")
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("not a size")
	}
	b := v * mult
	if b >= math.MaxInt64/2 {
		return 0, fmt.Errorf("too large")
	}
	return int64(b), nil
}

type fileResources struct {
	Memory      *string  `toml:"memory"`
	CPUs        *float64 `toml:"cpus"`
	Pids        *int64   `toml:"pids"`
	DiskReserve *string  `toml:"disk_reserve"`
	Limits      *string  `toml:"limits"`
}

// resources reads the keys of f under key over base (the global values,
// or the built-in defaults).
func (v *validator) resources(key keyPath, f fileResources, base Resources) Resources {
	r := base
	if f.Memory != nil {
		b, err := ParseSize(*f.Memory)
		if err != nil || b < MinMemory {
			v.fail(key.child("memory"), ruleErrf("invalid memory %s: a size such as \"8g\" or \"512m\", at least %s", quoteValue(*f.Memory), FormatSize(MinMemory)))
		} else {
			r.Memory = b
		}
	}
	if f.CPUs != nil {
		c := *f.CPUs
		if math.IsNaN(c) || c <= 0 || c > MaxCPUs {
			v.fail(key.child("cpus"), ruleErrf("invalid cpus %v: a number of cores above 0, such as 2 or 1.5, at most %d", c, MaxCPUs))
		} else {
			r.CPUs = c
		}
	}
	if f.Pids != nil {
		if n := *f.Pids; n < MinPids || n > MaxPids {
			v.fail(key.child("pids"), ruleErrf("invalid pids %d: want %d to %d", n, MinPids, MaxPids))
		} else {
			r.Pids = int(n)
		}
	}
	if f.DiskReserve != nil {
		d, err := parseReserve(*f.DiskReserve)
		if err != nil {
			v.fail(key.child("disk_reserve"), ruleErrf("invalid disk_reserve %s: a size such as \"5g\", or a percentage of the filesystem such as \"5%%\"", quoteValue(*f.DiskReserve)))
		} else {
			r.DiskReserve = d
		}
	}
	if f.Limits != nil {
		switch *f.Limits {
		case LimitsEnforced:
			r.BestEffort = false
		case LimitsBestEffort:
			r.BestEffort = true
		default:
			v.fail(key.child("limits"), ruleErrf("invalid limits %s: want %q (the default: a limit this host cannot enforce stops the start) or %q", quoteValue(*f.Limits), LimitsEnforced, LimitsBestEffort))
		}
	}
	return r
}

// parseReserve reads "5g" or "5%" (0% < p < 100%). "0" keeps no reserve.
func parseReserve(s string) (DiskReserve, error) {
	if p, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || math.IsNaN(v) || v < 0 || v >= 100 || strings.ContainsAny(p, "eE+-") {
			return DiskReserve{}, fmt.Errorf("not a percentage")
		}
		return DiskReserve{Percent: v}, nil
	}
	b, err := ParseSize(s)
	if err != nil {
		return DiskReserve{}, err
	}
	return DiskReserve{Bytes: b}, nil
}

// defaultResources are the built-in limits.
func defaultResources() Resources {
	return Resources{Pids: DefaultPids, DiskReserve: DefaultDiskReserve}
}
