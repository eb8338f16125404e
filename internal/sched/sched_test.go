package sched

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestEncodeParse(t *testing.T) {
	for _, s := range []Sched{{Nice: 10, IOLevel: 7}, {Nice: 10, IOLevel: 7, CPUs: []int{2, 3}}, {Nice: 0, IOLevel: 0}} {
		got, err := ParseSched(s.Encode())
		if err != nil || got.Nice != s.Nice || got.IOLevel != s.IOLevel || !slices.Equal(got.CPUs, s.CPUs) {
			t.Errorf("%q: %+v, %v", s.Encode(), got, err)
		}
	}
	for _, bad := range []string{"nice=-5", "nice=20", "nice=x", "io=8", "cpus=", "cpus=1,-1", "cpus=5000", "nice=1 nice=2", "color=red", "nice"} {
		if _, err := ParseSched(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseSched(f *testing.F) {
	f.Add("nice=10 io=7 cpus=2,3")
	f.Add("nice=19")
	f.Add("cpus=,")
	f.Fuzz(func(t *testing.T, a string) {
		s, err := ParseSched(a)
		if err != nil {
			return
		}
		if s.Nice < 0 || s.Nice > 19 || s.IOLevel > 7 {
			t.Fatalf("%q: %+v", a, s)
		}
		for _, c := range s.CPUs {
			if c < 0 || c > maxCPU {
				t.Fatalf("%q: cpu %d", a, c)
			}
		}
	})
}

// Apply on a thread of its own (discarded after: the goroutine ends
// locked), checked through the kernel's own view of that thread.
func TestApply(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	last := -1
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			last = i
		}
	}
	type result struct {
		prio  int
		io    uintptr
		cpus  int
		isSet bool
		err   error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		var r result
		r.err = Sched{Nice: 12, IOLevel: 6, CPUs: []int{last}}.Apply()
		// getpriority's raw value is 20 - nice.
		p, _ := unix.Getpriority(unix.PRIO_PROCESS, 0)
		r.prio = 20 - p
		r.io, _, _ = unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, 0, 0)
		var got unix.CPUSet
		_ = unix.SchedGetaffinity(0, &got)
		r.cpus, r.isSet = got.Count(), got.IsSet(last)
		done <- r
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.prio != 12 {
		t.Errorf("nice = %d, want 12", r.prio)
	}
	if r.io != ioprioClassBE<<ioprioClassShift|6 {
		t.Errorf("ioprio = %#x, want best-effort 6", r.io)
	}
	if r.cpus != 1 || !r.isSet {
		t.Errorf("affinity: %d cpus, cpu %d set %v", r.cpus, last, r.isSet)
	}
}

// SetAutogroupNice on a file standing for a process's autogroup (the
// test's own is its terminal session's), and on a kernel without them.
func TestSetAutogroupNice(t *testing.T) {
	autogroup := filepath.Join(t.TempDir(), "autogroup")
	if err := os.WriteFile(autogroup, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := SetAutogroupNice(autogroup, 10); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(autogroup); string(b) != "10" {
		t.Errorf("autogroup nice written %q, want 10", b)
	}
	if err := SetAutogroupNice(filepath.Join(t.TempDir(), "absent"), 10); err != nil {
		t.Errorf("a kernel without autogroups: %v", err)
	}
}
