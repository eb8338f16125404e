package ctl

// LimitsStatus is the usage of a sandbox against each of its resource
// limits (Status.Limits; lazaret status). Sizes are bytes.
type LimitsStatus struct {
	Memory *MemoryLimit `json:"memory,omitempty"`
	// Disk is one entry per host filesystem the sandbox writes.
	Disk []DiskLimit `json:"disk,omitempty"`
	// Paused: the sandbox is paused until a disk reserve is free again.
	Paused bool `json:"paused,omitempty"`
	// CPUs and Pids are the limits held from the sandbox's start (the
	// shim's affinity and priority; gVisor's RLIMIT_NPROC).
	CPUs *HeldLimit `json:"cpus,omitempty"`
	Pids *HeldLimit `json:"pids,omitempty"`
}

// HeldLimit is a limit set once at the start, and what holds it.
type HeldLimit struct {
	Value     string `json:"value"`
	Mechanism string `json:"mechanism"`
}

// MemoryLimit is the memory limit and the sandbox's usage.
type MemoryLimit struct {
	Limit int64 `json:"limit"`
	Used  int64 `json:"used"`
	// Ceiling is where the sandbox is stopped (the limit plus a margin).
	Ceiling   int64  `json:"ceiling,omitempty"`
	Mechanism string `json:"mechanism"`
	// Kills counts the processes killed in the sandbox at the limit.
	Kills   int  `json:"kills,omitempty"`
	Stopped bool `json:"stopped,omitempty"`
	// Unenforced says why the limit is not held (limits = best-effort).
	Unenforced string `json:"unenforced,omitempty"`
}

// DiskLimit is the reserve kept on one filesystem and its free space.
type DiskLimit struct {
	Path    string `json:"path"`
	Device  string `json:"device,omitempty"`
	Reserve uint64 `json:"reserve"`
	Free    uint64 `json:"free"`
	Paused  bool   `json:"paused,omitempty"`
}
