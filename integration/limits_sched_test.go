//go:build integration

package integration

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sandboxSched is the nice value, I/O priority and CPU count of the host
// process behind the agent container of e (runsc's Sentry), and the same
// for its network sidecar (runc, no lazaret.sched annotation): the
// control that the priority is not simply inherited from the test.
type procSched struct {
	nice  int
	ioprg uintptr
	cpus  int
	// autogroup is /proc/PID/autogroup ("/autogroup-N nice M"), "" on a
	// kernel without autogroups.
	autogroup string
}

func schedOf(t *testing.T, pid int) procSched {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis; nice is field 19.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	nice, err := strconv.Atoi(f[16])
	if err != nil {
		t.Fatalf("nice of %d: %v", pid, err)
	}
	io, _, _ := unix.Syscall(unix.SYS_IOPRIO_GET, 1, uintptr(pid), 0)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		t.Fatal(err)
	}
	ag, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/autogroup")
	return procSched{nice: nice, ioprg: io, cpus: set.Count(), autogroup: strings.TrimSpace(string(ag))}
}

// agentAndSidecarPids are the host pids of e's agent container (its
// Sentry) and of its network sidecar, once both run.
func agentAndSidecarPids(t *testing.T, e *Env) (agent, sidecar int) {
	t.Helper()
	pidOf := func(name string) int {
		out, err := Podman(t, "inspect", "--format", "{{.State.Pid}}", name)
		pid, _ := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			return 0
		}
		return pid
	}
	Eventually(t, 60*time.Second, "the agent container and its sidecar", func() bool {
		out, _ := Podman(t, "ps", "--filter", "label=lazaret.data_root="+e.DataRoot, "--filter", "label=lazaret.profile=default",
			"--format", `{{.Names}} {{index .Labels "lazaret.domain"}}`)
		name, hash, ok := strings.Cut(strings.TrimSpace(out), " ")
		if !ok || strings.Contains(hash, "\n") {
			return false
		}
		agent, sidecar = pidOf(name), pidOf("lazaret-netd."+hash)
		return agent > 0 && sidecar > 0
	})
	return agent, sidecar
}

// TestLimitsCPUAndPriority: cpus = 1 keeps the sandbox on one core (the
// agent sees one, the Sentry's affinity is one), and every sandbox runs at
// nice 10 and best-effort I/O level 7. Control: without cpus the sandbox
// has every core; the network sidecar (no annotation) runs at nice 0.
func TestLimitsCPUAndPriority(t *testing.T) {
	t.Parallel()
	var host unix.CPUSet
	if err := unix.SchedGetaffinity(0, &host); err != nil {
		t.Fatal(err)
	}
	if host.Count() < 2 {
		t.Skip("one CPU: nothing to bound")
	}
	for _, tc := range []struct {
		name, config string
		wantCPUs     int
	}{
		{"cpus=1", "[profiles.default]\ncpus = 1\n", 1},
		{"control", "", host.Count()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := NewEnv(t)
			e.WriteConfig(tc.config)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := e.Cmd(ctx, "exec", "--", "sh", "-c", "nproc; sleep 30")
			var out strings.Builder
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			agentPid, sidecarPid := agentAndSidecarPids(t, e)
			sandbox, sidecar := schedOf(t, agentPid), schedOf(t, sidecarPid)
			if sandbox.nice != 10 || sandbox.ioprg != 2<<13|7 {
				t.Errorf("sandbox: nice %d, ioprio %#x; want nice 10, best-effort 7", sandbox.nice, sandbox.ioprg)
			}
			if sidecar.nice != 0 {
				t.Errorf("control: the sidecar runs at nice %d, not 0", sidecar.nice)
			}
			// The session's group, which the scheduler shares CPU between
			// first: the coordinator lowers the Sentry's once it watches
			// it (about a second after the start); the sidecar's is not.
			if sandbox.autogroup != "" {
				Eventually(t, 20*time.Second, "the Sentry's session group at nice 10", func() bool {
					return strings.HasSuffix(schedOf(t, agentPid).autogroup, " nice 10")
				})
				if !strings.HasSuffix(sidecar.autogroup, " nice 0") {
					t.Errorf("control: the sidecar's session group %q, not at nice 0", sidecar.autogroup)
				}
			}
			if sandbox.cpus != tc.wantCPUs {
				t.Errorf("sandbox on %d CPUs, want %d", sandbox.cpus, tc.wantCPUs)
			}
			Eventually(t, 30*time.Second, "nproc inside", func() bool { return strings.TrimSpace(out.String()) != "" })
			if got := strings.TrimSpace(out.String()); got != strconv.Itoa(tc.wantCPUs) {
				t.Errorf("nproc inside = %q, want %d", got, tc.wantCPUs)
			}
		})
	}
}

// TestLimitsUnenforceable: a fractional cpus cannot be held without a CPU
// controller: the start fails with one line naming the key and leaves no
// container; limits = "best-effort" starts it on the whole cores above.
func TestLimitsUnenforceable(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteConfig("[profiles.default]\ncpus = 1.5\n")
	r := e.Run("exec", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "profiles.default.cpus") || !strings.Contains(r.Stderr, "best-effort") {
		t.Fatalf("cpus = 1.5: exit %d, stderr %q", r.Code, r.Stderr)
	}
	if first, _, _ := strings.Cut(r.Stderr, "\nhint:"); strings.Contains(strings.TrimSpace(first), "\n") {
		t.Errorf("not one line: %q", r.Stderr)
	}
	if out, _ := Podman(t, "ps", "-a", "--filter", "label=lazaret.data_root="+e.DataRoot, "--filter", "label=lazaret.profile=default", "--format", "{{.Names}}"); strings.TrimSpace(out) != "" {
		t.Errorf("left behind: %s", out)
	}
	e.WriteConfig("[profiles.default]\ncpus = 1.5\nlimits = \"best-effort\"\n")
	if r := e.Run("exec", "--", "true"); r.Code != 0 {
		t.Fatalf("best-effort: exit %d, stderr %q", r.Code, r.Stderr)
	}
}
