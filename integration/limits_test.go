//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Resource limits on the real path (docs/SECURITY.md, "Resource limits"):
// this host gives the rootless user no cgroup controllers, so the
// coordinator's watchdog (internal/coordinator/limits) holds them. Each
// test samples what the sandbox takes of the host itself, every 20 ms.

const limitsImage = `image = "localhost/lazaret-default:latest"` + "\n"

// syncBuffer is a bytes.Buffer written by a command and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// limitsStatus is what these tests read of `lazaret status --json`.
type limitsStatus struct {
	Status *struct {
		PID       int `json:"pid"`
		Container struct {
			Name string `json:"name"`
		} `json:"container"`
		Limits *struct {
			Memory *struct {
				Limit int64 `json:"limit"`
				Used  int64 `json:"used"`
				Kills int   `json:"kills"`
			} `json:"memory"`
			Disk []struct {
				Reserve uint64 `json:"reserve"`
				Free    uint64 `json:"free"`
				Paused  bool   `json:"paused"`
			} `json:"disk"`
			Paused bool `json:"paused"`
		} `json:"limits"`
	} `json:"status"`
}

func limitsStatusOf(t *testing.T, e *Env) limitsStatus {
	t.Helper()
	var st limitsStatus
	if err := json.Unmarshal([]byte(e.MustRun("status", "--json", "lim")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// holdSandbox starts a session that keeps profile's sandbox up and
// returns the sandbox's status once it runs.
func holdSandbox(t *testing.T, e *Env, profile string) (*limitsStatus, func() bool) {
	t.Helper()
	cmd := e.Cmd(t.Context(), "exec", profile, "--", "sleep", "600")
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	var st limitsStatus
	Eventually(t, 2*time.Minute, "the sandbox to run", func() bool {
		st = limitsStatusOf(t, e)
		return st.Status != nil && st.Status.Container.Name != "" && st.Status.Limits != nil && st.Status.Limits.Memory != nil && st.Status.Limits.Memory.Used > 0
	})
	alive := func() bool {
		select {
		case <-exited:
			return false
		default:
			return true
		}
	}
	return &st, alive
}

// memSampler samples the sandbox's memory as the host holds it: the
// Sentry's memory file's allocated blocks plus its anonymous resident
// memory, every 20 ms, independently of lazaret.
type memSampler struct {
	stop chan struct{}
	done chan int64
}

func sampleSentry(t *testing.T, container string) *memSampler {
	t.Helper()
	out, err := Podman(t, "inspect", "--format", "{{.State.Pid}}", container)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var memfd *os.File
	for _, en := range ents {
		if l, _ := os.Readlink(filepath.Join(dir, en.Name())); l == "/memfd:runsc-memory (deleted)" {
			if memfd, err = os.Open(filepath.Join(dir, en.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if memfd == nil {
		t.Fatalf("the Sentry %d has no memory file", pid)
	}
	statm, err := os.Open(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := &memSampler{stop: make(chan struct{}), done: make(chan int64, 1)}
	page := int64(os.Getpagesize())
	go func() {
		defer memfd.Close()
		defer statm.Close()
		var peak int64
		buf := make([]byte, 128)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var st unix.Stat_t
			if unix.Fstat(int(memfd.Fd()), &st) == nil {
				used := st.Blocks * 512
				if n, _ := statm.ReadAt(buf, 0); n > 0 {
					if f := strings.Fields(string(buf[:n])); len(f) > 2 {
						res, _ := strconv.ParseInt(f[1], 10, 64)
						shared, _ := strconv.ParseInt(f[2], 10, 64)
						used += max(res-shared, 0) * page
					}
				}
				peak = max(peak, used)
			}
			select {
			case <-s.stop:
				s.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *memSampler) peak() int64 { close(s.stop); return <-s.done }

const mib = 1 << 20

// fillBuffer makes a process grow a 1.5 GiB buffer the way programs
// allocate, a read at a time (tail keeps a line that never ends). A dd
// with bs=1500M fills its buffer in one read(2), which gVisor does not
// interrupt for a signal before it returns (measured: SIGKILL took effect
// 2.8 s later, when the read ended): that is TestLimitsMemoryHardStop's.
const fillBuffer = "head -c 1500M /dev/zero | tail; echo fill-exit=$?"

// TestLimitsMemorySoftKill: a 512m profile whose agent fills a 1.5 GiB
// buffer takes under 800 MiB of the host: the watchdog kills the process
// inside the sandbox (tail exits 137), every terminal is told, and the
// sandbox survives (the holding session lives on, a following exec runs
// in the same sandbox). Control: TestLimitsMemoryControl.
func TestLimitsMemorySoftKill(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteConfig("[profiles.lim]\n" + limitsImage + "memory = \"512m\"\n")
	st, alive := holdSandbox(t, e, "lim")
	if l := st.Status.Limits.Memory.Limit; l != 512*mib {
		t.Fatalf("status: memory limit %d", l)
	}
	s := sampleSentry(t, st.Status.Container.Name)
	// The session stays attached a moment after the kill: the notice is
	// sent once the killer answers, and a one-shot exec that ended at once
	// could miss it (every attached terminal gets it).
	r := e.Run("exec", "lim", "--", "sh", "-c", fillBuffer+"; sleep 2")
	peak := s.peak()
	t.Logf("peak host memory of the sandbox: %d MiB", peak/mib)
	if !strings.Contains(r.Stdout, "fill-exit=137") {
		t.Fatalf("the filler was not killed: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "lazaret: memory limit 512m reached") || !strings.Contains(r.Stderr, "killed process") || !strings.Contains(r.Stderr, "(tail, ") {
		t.Fatalf("the session was not told:\n%s", r.Stderr)
	}
	if peak >= 800*mib {
		t.Fatalf("the sandbox took %d MiB of the host (limit 512 MiB, bound 800)", peak/mib)
	}
	if !alive() {
		t.Fatal("the holding session ended: the sandbox did not survive the kill")
	}
	after := limitsStatusOf(t, e)
	if after.Status == nil || after.Status.PID != st.Status.PID || after.Status.Limits.Memory.Kills < 1 {
		t.Fatalf("status after the kill: %+v", after.Status)
	}
	if out := e.MustRun("exec", "lim", "--", "echo", "still-here"); !strings.Contains(out, "still-here") {
		t.Fatalf("exec after the kill: %q", out)
	}
}

// TestLimitsMemoryControl: with memory = "4g" the same allocation goes
// through (the attack the 512m test stops succeeds without the limit).
func TestLimitsMemoryControl(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteConfig("[profiles.lim]\n" + limitsImage + "memory = \"4g\"\n")
	st, _ := holdSandbox(t, e, "lim")
	s := sampleSentry(t, st.Status.Container.Name)
	r := e.Run("exec", "lim", "--", "sh", "-c", fillBuffer)
	peak := s.peak()
	t.Logf("peak host memory of the sandbox: %d MiB", peak/mib)
	if !strings.Contains(r.Stdout, "fill-exit=0") || strings.Contains(r.Stderr, "memory limit") {
		t.Fatalf("the allocation did not complete: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	if peak < 1400*mib {
		t.Fatalf("the sandbox took only %d MiB: the allocation did not happen", peak/mib)
	}
}

// TestLimitsMemoryHardStop: an allocation the OOM kill cannot stop (one
// read(2) filling a 1.5 GiB buffer: gVisor delivers the kill only when it
// returns) passes the limit's margin: the Sentry is stopped at once and
// the sandbox torn down, the session told why, and the host never gives
// it more than the limit + margin + one poll's growth.
func TestLimitsMemoryHardStop(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteConfig("[profiles.lim]\n" + limitsImage + "memory = \"512m\"\n")
	st, _ := holdSandbox(t, e, "lim")
	s := sampleSentry(t, st.Status.Container.Name)
	r := e.Run("exec", "lim", "--", "sh", "-c", "dd if=/dev/zero of=/dev/null bs=1500M count=1; echo dd-exit=$?")
	peak := s.peak()
	t.Logf("peak host memory of the sandbox: %d MiB", peak/mib)
	if strings.Contains(r.Stdout, "dd-exit=0") {
		t.Fatalf("the allocation completed:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stderr, "memory limit 512m exceeded") || !strings.Contains(r.Stderr, "the sandbox was stopped; raise memory in profile lim") {
		t.Fatalf("the session was not told: exit %d\n%s", r.Code, r.Stderr)
	}
	if peak >= 800*mib {
		t.Fatalf("the sandbox took %d MiB of the host (limit 512 MiB, bound 800)", peak/mib)
	}
}

// meminfo returns MemTotal and MemAvailable in bytes.
func meminfo(t *testing.T) (total, avail int64) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "MemTotal:":
			total = v << 10
		case "MemAvailable:":
			avail = v << 10
		}
	}
	return total, avail
}

// TestLimitsMemoryDefault: with no memory key (the built-in default, 40%
// of the host's RAM), an agent (perl) that tries to take 60% of the host's RAM is
// stopped before the host falls below 45% available. Escalation is off,
// so the OOM killer is the limits component's own mount. Not parallel:
// it takes 40% of the host.
func TestLimitsMemoryDefault(t *testing.T) {
	total, _ := meminfo(t)
	if total > 64<<30 {
		t.Skipf("MemTotal %d GiB > 64 GiB: filling 60%% of it would take too long for CI", total>>30)
	}
	e := NewEnv(t)
	e.WriteConfig("[escalation]\nenabled = false\n[profiles.lim]\n" + limitsImage)
	holdSandbox(t, e, "lim")
	var minAvail int64 = total
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			_, a := meminfo(t)
			minAvail = min(minAvail, a)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	bs := total * 6 / 10 / mib
	// perl takes 1 MiB at a time (about 160 MiB/s in gVisor, measured);
	// `head | tail`, the 512m tests' fill, grows at 17-40 MiB/s and took
	// 276 s to reach 40% of a 23 GiB host. RunLong: a hang guard only.
	r := e.RunLong(8*time.Minute, "exec", "lim", "--", "sh", "-c", fmt.Sprintf(`perl -e 'my @a; for (1..%d) { push @a, "x" x (1<<20) }'; echo fill-exit=$?`, bs))
	close(stop)
	<-done
	t.Logf("MemTotal %d MiB; the lowest MemAvailable during a %d MiB allocation: %d MiB (%.1f%%); told: %s", total/mib, bs, minAvail/mib, 100*float64(minAvail)/float64(total), strings.TrimSpace(r.Stderr))
	if !strings.Contains(r.Stderr, "lazaret: memory limit") {
		t.Fatalf("not told: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout, "fill-exit=0") {
		t.Fatalf("the allocation completed:\n%s", r.Stdout)
	}
	if minAvail < total*45/100 {
		t.Fatalf("the host fell to %d MiB available (%.1f%%), below 45%%", minAvail/mib, 100*float64(minAvail)/float64(total))
	}
}

// freeBytes is the space an unprivileged user may still use on path's
// filesystem.
func freeBytes(t *testing.T, path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// freeSampler tracks the lowest free space of path's filesystem, every
// 10 ms.
func freeSampler(t *testing.T, path string) (stop func() int64) {
	low := freeBytes(t, path)
	done := make(chan struct{})
	res := make(chan int64, 1)
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var st syscall.Statfs_t
			if syscall.Statfs(path, &st) == nil {
				low = min(low, int64(st.Bavail)*st.Bsize)
			}
			select {
			case <-done:
				res <- low
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() int64 {
		once.Do(func() { close(done) })
		select {
		case v := <-res:
			res <- v
			return v
		case <-time.After(time.Second):
			return low
		}
	}
	t.Cleanup(func() { stop() })
	return stop
}

// diskOvershoot is how far below the reserve free space may fall: what a
// 1.8 GB/s write adds in one 10 ms poll, the SIGSTOP's delivery and the
// page cache's delayed allocation (measured: see the test's log line).
const diskOvershoot = 64 * mib

// TestLimitsDiskReserve: with disk_reserve at 300 MiB below the free
// space, an agent writing 600 MiB into the workspace (direct mode) is
// paused before the reserve is gone, every terminal is told how it
// resumes, and it resumes by itself once the test deletes a host-side
// ballast file: the write completes. Control: TestLimitsDiskControl.
func TestLimitsDiskReserve(t *testing.T) {
	e := NewEnv(t)
	ballast := filepath.Join(e.Root, "ballast")
	f, err := os.Create(ballast)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 1<<30); err != nil {
		t.Skipf("fallocate: %v", err)
	}
	f.Close()
	t.Cleanup(func() { os.Remove(ballast) })
	reserve := freeBytes(t, e.Root) - 300*mib
	e.WriteConfig(fmt.Sprintf("[profiles.lim]\n%sdisk_reserve = \"%d\"\n", limitsImage, reserve))
	holdSandbox(t, e, "lim")
	stop := freeSampler(t, e.Root)
	cmd := e.Cmd(t.Context(), "exec", "lim", "--", "sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=600 2>/dev/null && sync && echo write-done")
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	Eventually(t, time.Minute, "the pause notice", func() bool { return strings.Contains(errb.String(), "the sandbox is paused and resumes by itself") })
	time.Sleep(time.Second)
	select {
	case err := <-exited:
		t.Fatalf("the write finished while the sandbox was paused: %v\n%s\n%s", err, out.String(), errb.String())
	default:
	}
	if st := limitsStatusOf(t, e); st.Status == nil || !st.Status.Limits.Paused {
		t.Fatalf("status does not show the pause: %+v", st.Status)
	}
	low := stop()
	t.Logf("reserve %d MiB; lowest free space while writing %d MiB (overshoot %d MiB)", reserve/mib, low/mib, (reserve-low)/mib)
	if low < reserve-diskOvershoot {
		t.Fatalf("free space fell to %d MiB, %d MiB below the reserve", low/mib, (reserve-low)/mib)
	}
	if !strings.Contains(errb.String(), "disk_reserve") || !strings.Contains(errb.String(), "lazaret stop") {
		t.Fatalf("notice: %s", errb.String())
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil || !strings.Contains(out.String(), "write-done") {
			t.Fatalf("the write after the resume: %v\n%s\n%s", err, out.String(), errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the sandbox did not resume:\n%s", errb.String())
	}
	if !strings.Contains(errb.String(), "the sandbox runs again") {
		t.Fatalf("the resume was not told:\n%s", errb.String())
	}
}

// TestLimitsDiskControl: with disk_reserve = "0" the same write goes
// through and takes the free space below where the reserve was.
func TestLimitsDiskControl(t *testing.T) {
	e := NewEnv(t)
	reserve := freeBytes(t, e.Root) - 300*mib
	e.WriteConfig("[profiles.lim]\n" + limitsImage + "disk_reserve = \"0\"\n")
	holdSandbox(t, e, "lim")
	stop := freeSampler(t, e.Root)
	r := e.Run("exec", "lim", "--", "sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=600 2>/dev/null && sync && echo write-done")
	low := stop()
	if !strings.Contains(r.Stdout, "write-done") || strings.Contains(r.Stderr, "paused") {
		t.Fatalf("the write did not complete: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if low >= reserve {
		t.Fatalf("free space stayed at %d MiB, above the would-be reserve %d MiB: the write did not take it", low/mib, reserve/mib)
	}
}
