// Package sched is the scheduling of a sandbox's host processes: their
// priority, I/O priority and CPUs, as the coordinator writes them into the
// agent container's spec and the runsc shim applies them. A leaf of its
// own: the shim links nothing else of lazaret's configuration.
package sched

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Annotation is the agent container's annotation that tells the
// runsc shim (internal/shim) the priority and CPUs of the sandbox's
// processes: set on the shim itself before it executes runsc create, they
// are inherited by the Sentry, the gofer and every process they start.
const Annotation = "lazaret.sched"

// Sched is the scheduling of a sandbox's host processes.
type Sched struct {
	Nice    int   // 0..19
	IOLevel int   // best-effort class level 0..7 (-1: unchanged)
	CPUs    []int // affinity; nil: unchanged
}

// FormatCPUs prints a CPU list as "2,3".
func FormatCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// Encode is s as the annotation: "nice=10 io=7 cpus=2,3".
func (s Sched) Encode() string {
	a := fmt.Sprintf("nice=%d io=%d", s.Nice, s.IOLevel)
	if len(s.CPUs) > 0 {
		a += " cpus=" + FormatCPUs(s.CPUs)
	}
	return a
}

// maxCPU bounds a CPU number in an annotation (unix.CPUSet's size).
const maxCPU = 1023

// ParseSched decodes an annotation written by Encode. It is the
// coordinator's, but the shim checks it as it would any input.
func ParseSched(a string) (Sched, error) {
	s := Sched{IOLevel: -1}
	seen := map[string]bool{}
	for _, f := range strings.Fields(a) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || seen[k] {
			return Sched{}, fmt.Errorf("%s: bad field %q", Annotation, f)
		}
		seen[k] = true
		switch k {
		case "nice":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 19 {
				return Sched{}, fmt.Errorf("%s: bad nice %q", Annotation, v)
			}
			s.Nice = n
		case "io":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 7 {
				return Sched{}, fmt.Errorf("%s: bad io level %q", Annotation, v)
			}
			s.IOLevel = n
		case "cpus":
			for _, c := range strings.Split(v, ",") {
				n, err := strconv.Atoi(c)
				if err != nil || n < 0 || n > maxCPU {
					return Sched{}, fmt.Errorf("%s: bad cpu %q", Annotation, c)
				}
				s.CPUs = append(s.CPUs, n)
			}
		default:
			return Sched{}, fmt.Errorf("%s: unknown field %q", Annotation, k)
		}
	}
	return s, nil
}

// SetAutogroupNice gives the scheduling autogroup of process pid the nice
// value n. With autogroups on (sched_autogroup_enabled, the default of
// most desktop kernels) the scheduler first shares CPU between sessions
// and only then by nice within one; runsc starts the Sentry in a session
// of its own, so its process nice alone does not put it below the user's
// terminal session (bench/limits), and a new session's group starts at
// nice 0 whatever its creator's was: the coordinator sets it once the
// Sentry runs. Raising an autogroup's nice needs no privilege, but the
// kernel takes one change per 100 ms from an unprivileged user (EAGAIN):
// it is tried for a second. A kernel without autogroups has no such file:
// nothing to do.
func SetAutogroupNice(file string, n int) error {
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("autogroup nice %d: %w", n, err)
	}
	defer f.Close()
	for try := 0; ; try++ {
		_, err = f.WriteString(strconv.Itoa(n))
		if !errors.Is(err, unix.EAGAIN) || try == 20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("autogroup nice %d: %w", n, err)
	}
	return nil
}

// AutogroupFile is the autogroup file of process pid.
func AutogroupFile(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/autogroup" }

// ioprio_set's constants (linux/ioprio.h).
const (
	ioprioWhoProcess = 1
	ioprioClassBE    = 2
	ioprioClassShift = 13
)

// Apply sets s on the calling process (all its threads: call it before
// the process starts others, as the shim does before exec). Lowering
// priority needs no privilege.
func (s Sched) Apply() error {
	if err := unix.Setpriority(unix.PRIO_PROCESS, 0, s.Nice); err != nil {
		return fmt.Errorf("nice %d: %w", s.Nice, err)
	}
	if s.IOLevel >= 0 {
		prio := ioprioClassBE<<ioprioClassShift | s.IOLevel
		if _, _, e := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, 0, uintptr(prio)); e != 0 {
			return fmt.Errorf("I/O priority: %w", e)
		}
	}
	if len(s.CPUs) > 0 {
		var set unix.CPUSet
		for _, c := range s.CPUs {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("CPU affinity %s: %w", FormatCPUs(s.CPUs), err)
		}
	}
	return nil
}
