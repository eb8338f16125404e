// Command limits benchmarks what the resource limits (issue 41) cost and
// give, against the bare podman/runsc baseline (the same lazaret-runsc
// shim, no lazaret.sched annotation: nice 0), in one run:
//
//   - the host-side latency probe: `true` spawned on the host every
//     100 ms for LIMITS_PROBE_S seconds (default 4), its median and p99,
//     then the time of a fixed CPU-bound shell loop on the host (the
//     user's own work, nice 0), LIMITS_ROUNDS rounds (default 3) of the
//     phases in a rotated order: while idle, while an agent in a lazaret
//     sandbox (nice 10, best-effort I/O level 7) keeps every core busy,
//     and while the same
//     loop runs in the same lazaret sandbox at nice 0 (a wrapper of the
//     shim rewrites its lazaret.sched annotation) and in a bare runsc
//     container (the sandbox at the user's own priority, as before the
//     limits);
//   - the watchdog's cost: a warm `lazaret exec -- true` in a sandbox
//     whose profile sets memory = "2g" and in one with the limits at
//     their defaults, against `podman exec` of the bare container, and a
//     small build in the workspace (`go build strconv`, fresh cache, the
//     host's Go toolchain mounted read-only) in the same three and on the
//     host, rounds alternated; and the coordinator's CPU time per second
//     while its sandbox idles (what the watchdog's polling costs).
//
// It runs as the unprivileged podman user with LAZARET_BIN naming the
// built binaries (scripts/bench), GOROOT_SRC a Go installation (default
// /usr/local/go); LIMITS_N sets the rounds (default 9 execs, 3 builds).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

const image = "localhost/lazaret-default:latest"

// burnScript keeps $1 cores busy until it is killed (timeout kills its
// whole process group).
const burnScript = `i=0; while [ $i -lt $1 ]; do (while :; do :; done) & i=$((i+1)); done; wait`

// cpuTask is the user's own CPU-bound work on the host: a shell loop of
// a fixed length (about 0.3 s on an idle core here).
const cpuTask = `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`

// buildScript builds strconv with the toolchain in $GOROOT and a fresh
// cache in the workspace, and prints the nanoseconds it took.
const buildScript = `set -e
export GOCACHE="$PWD/.bench-cache" GOPATH="$PWD/.bench-gopath" GOTOOLCHAIN=local GOENV=off CGO_ENABLED=0 GOFLAGS=
rm -rf "$GOCACHE"
s=$(date +%s%N)
"$GOROOT/bin/go" build -o /dev/null strconv
e=$(date +%s%N)
rm -rf "$GOCACHE"
echo "build-ns $((e-s))"`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/limits:", err)
		os.Exit(1)
	}
}

type bench struct {
	bin, config, root, goroot string
	bare                      string // the bare container's name
	probeFor                  time.Duration
	rounds                    int
}

// sandbox is one lazaret sandbox of the benchmark: a profile, its
// workspace and the session that holds it up.
type sandbox struct {
	name, profile, ws string
	env               []string
	hold              *exec.Cmd
}

// lz runs lazaret in s's workspace, with s's environment.
func (b *bench) lz(s *sandbox, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(b.bin, "lazaret"), append([]string{"--config", b.config}, args...)...)
	cmd.Dir, cmd.Env = s.ws, append(os.Environ(), s.env...)
	return cmd
}

// unnicedShim is a wrapper of the lazaret-runsc shim ($1) that rewrites
// the lazaret.sched annotation of the bundle it creates to the user's own
// priority (nice 0, best-effort I/O level 4, what nice 0 implies) before
// the shim applies it: the same sandbox without the lower priority.
const unnicedShim = `#!/bin/bash
shim=%q
bundle=. create=
prev=
for a in "$@"; do
	case $a in
	create) create=1 ;;
	--bundle=* | -bundle=*) bundle=${a#*=} ;;
	esac
	case $prev in --bundle | -bundle | -b) bundle=$a ;; esac
	prev=$a
done
if [ -n "$create" ] && [ -f "$bundle/config.json" ]; then
	sed -i 's/"lazaret\.sched"\([[:space:]]*:[[:space:]]*\)"nice=10 io=7/"lazaret.sched"\1"nice=0 io=4/' "$bundle/config.json"
fi
exec -a lazaret-runsc "$shim" "$@"
`

func run() error {
	b := &bench{bin: os.Getenv("LAZARET_BIN"), goroot: os.Getenv("GOROOT_SRC"), probeFor: 4 * time.Second, rounds: 3}
	if b.bin == "" {
		return fmt.Errorf("LAZARET_BIN is not set")
	}
	if b.goroot == "" {
		b.goroot = "/usr/local/go"
	}
	if v, err := strconv.Atoi(os.Getenv("LIMITS_PROBE_S")); err == nil && v > 0 {
		b.probeFor = time.Duration(v) * time.Second
	}
	if v, err := strconv.Atoi(os.Getenv("LIMITS_ROUNDS")); err == nil && v > 0 {
		b.rounds = v
	}
	execN, buildN := 9, 3
	if v, err := strconv.Atoi(os.Getenv("LIMITS_N")); err == nil && v > 0 {
		execN, buildN = v, v
	}
	root, err := os.MkdirTemp("", "lazaret-bench-limits-")
	if err != nil {
		return err
	}
	b.root, b.config, b.bare = root, filepath.Join(root, "config.toml"), "lazaret-bench-limits-"+filepath.Base(root)
	wrapper := filepath.Join(root, "lazaret-runsc-unniced")
	if err := os.WriteFile(wrapper, fmt.Appendf(nil, unnicedShim, filepath.Join(b.bin, "lazaret-runsc")), 0o755); err != nil {
		return err
	}
	unniced := &sandbox{name: "lazaret at nice 0", profile: "default", env: []string{"LAZARET_SHIM=" + wrapper}}
	boxes := []*sandbox{{name: "lazaret, memory = \"2g\"", profile: "limited"}, {name: "lazaret, limits at their defaults", profile: "default"}}
	defer b.cleanup(append(boxes, unniced))
	if err := b.setup(append(boxes, unniced)); err != nil {
		return err
	}
	load0 := loadAvg()
	probes, err := b.probes(boxes[1], unniced)
	if err != nil {
		return err
	}
	idleCPU := b.coordinatorCPU(boxes)
	execs, err := b.execs(boxes, execN)
	if err != nil {
		return err
	}
	builds, err := b.builds(boxes, buildN)
	if err != nil {
		return err
	}
	b.print(probes, idleCPU, execs, builds, execN, buildN, load0)
	return nil
}

// setup writes the configuration, makes the workspaces and starts the
// two sandboxes (each held by a session) and the bare container.
func (b *bench) setup(boxes []*sandbox) error {
	vol := fmt.Sprintf(`volumes = [{ host = %q, container = %q, mode = "ro" }]`, b.goroot, b.goroot)
	cfg := fmt.Sprintf("data_root = %q\n\n[profiles.default]\ngit_mode = \"direct\"\n%s\n\n[profiles.limited]\nimage = %q\ngit_mode = \"direct\"\nmemory = \"2g\"\n%s\n",
		filepath.Join(b.root, "data"), vol, image, vol)
	if err := os.WriteFile(b.config, []byte(cfg), 0o600); err != nil {
		return err
	}
	for i, s := range boxes {
		s.ws = filepath.Join(b.root, "ws"+strconv.Itoa(i))
		if err := os.MkdirAll(s.ws, 0o755); err != nil {
			return err
		}
		s.hold = b.lz(s, "exec", s.profile, "--", "sleep", "36000")
		if err := s.hold.Start(); err != nil {
			return err
		}
		if err := b.waitSession(s); err != nil {
			return err
		}
	}
	ws := filepath.Join(b.root, "wsbare")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	out, err := exec.Command("podman", "run", "-d", "--name", b.bare, "--pull=never", "--runtime", filepath.Join(b.bin, "lazaret-runsc"),
		"--network", "none", "-v", b.goroot+":"+b.goroot+":ro", "-v", ws+":/workspace", "--workdir", "/workspace", image, "sleep", "36000").CombinedOutput()
	if err != nil {
		return fmt.Errorf("podman run: %v: %s", err, out)
	}
	return nil
}

// waitSession waits until s's holding session is attached.
func (b *bench) waitSession(s *sandbox) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if st, err := b.status(s); err == nil && st.sessions > 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s: the holding session did not attach", s.name)
}

type status struct{ pid, sessions int }

func (b *bench) status(s *sandbox) (status, error) {
	var st struct {
		Status *struct {
			PID      int               `json:"pid"`
			Sessions []json.RawMessage `json:"sessions"`
		} `json:"status"`
	}
	out, err := b.lz(s, "status", s.profile, "--json").Output()
	if err != nil {
		return status{}, err
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Status == nil {
		return status{}, fmt.Errorf("no status: %v", err)
	}
	return status{st.Status.PID, len(st.Status.Sessions)}, nil
}

// container is the name of s's agent container.
func (b *bench) container(s *sandbox) (string, error) {
	var dom struct {
		Resources map[string]string `json:"resources"`
	}
	out, err := b.lz(s, "domain", s.profile, "--json").Output()
	if err != nil {
		return "", fmt.Errorf("lazaret domain: %w", err)
	}
	if err := json.Unmarshal(out, &dom); err != nil {
		return "", err
	}
	return dom.Resources["container"], nil
}

func (b *bench) cleanup(boxes []*sandbox) {
	for _, s := range boxes {
		if s.ws != "" {
			_ = b.lz(s, "stop", s.profile).Run()
		}
		if s.hold != nil && s.hold.Process != nil {
			_ = s.hold.Process.Kill()
			_ = s.hold.Wait()
		}
	}
	_ = exec.Command("podman", "rm", "-f", "-t", "0", b.bare).Run()
	_ = exec.Command("podman", "unshare", "rm", "-rf", b.root).Run()
	_ = os.RemoveAll(b.root)
}

// probe is one phase of the host-side latency probe.
type probe struct {
	name        string
	median, p99 time.Duration
	busy        float64       // the host's CPUs busy during the probe, 0..1 (the mean of the rounds)
	task        time.Duration // the host's CPU task, the median
	nice        string        // the nice values of the burning sandbox's runsc processes
	lat, tasks  []time.Duration
}

// phase is one phase of the probe: its burner (nil: idle) and the
// container it burns in.
type phase struct {
	name, container string
	burner          func() *exec.Cmd
}

// probes measures the host's spawn latency and CPU task idle, while s
// burns every core, while unniced (the same sandbox at nice 0) does, and
// while the bare container does: b.rounds rounds of the four phases, the
// order rotated round by round so that the machine's other load hits all
// alike.
func (b *bench) probes(s, unniced *sandbox) ([]probe, error) {
	cores := strconv.Itoa(runtime.NumCPU())
	// The burner outlasts its spin-up, the probe and the CPU task.
	secs := strconv.Itoa(int(b.probeFor/time.Second) + 6)
	burn := []string{"timeout", secs, "sh", "-c", burnScript, "burn", cores}
	ctr, err := b.container(s)
	if err != nil {
		return nil, err
	}
	ctr0, err := b.container(unniced)
	if err != nil {
		return nil, err
	}
	phases := []phase{
		{name: "idle"},
		{"every core busy in a lazaret sandbox (nice 10, I/O best-effort 7)", ctr, func() *exec.Cmd {
			return b.lz(s, append([]string{"exec", s.profile, "--"}, burn...)...)
		}},
		{"the same in a lazaret sandbox at nice 0 (its lazaret.sched rewritten)", ctr0, func() *exec.Cmd {
			return b.lz(unniced, append([]string{"exec", unniced.profile, "--"}, burn...)...)
		}},
		{"every core busy in the bare runsc container (nice 0)", b.bare, func() *exec.Cmd {
			return exec.Command("podman", append([]string{"exec", b.bare}, burn...)...)
		}},
	}
	out := make([]probe, len(phases))
	for i, ph := range phases {
		out[i] = probe{name: ph.name, nice: "–"}
	}
	for r := range b.rounds {
		for j := range phases {
			k := (r + j) % len(phases)
			if err := b.probePhase(&out[k], phases[k]); err != nil {
				return nil, err
			}
		}
	}
	for i := range out {
		p := &out[i]
		slices.Sort(p.lat)
		p.median, p.p99 = p.lat[len(p.lat)/2], p.lat[min(len(p.lat)-1, len(p.lat)*99/100)]
		p.task = median(p.tasks)
		p.busy /= float64(b.rounds)
	}
	return out, nil
}

// probePhase runs ph's burner, lets it spin up, then spawns `true` every
// 100 ms for b.probeFor, times the CPU task 3 times, and waits for the
// burner to end; it adds what it measured to p.
func (b *bench) probePhase(p *probe, ph phase) error {
	var burner *exec.Cmd
	if ph.burner != nil {
		burner = ph.burner()
		if err := burner.Start(); err != nil {
			return err
		}
		time.Sleep(2 * time.Second)
		p.nice = runscNice(ph.container)
	}
	t0 := cpuTimes()
	tick := time.NewTicker(100 * time.Millisecond)
	for end := time.Now().Add(b.probeFor); time.Now().Before(end); <-tick.C {
		start := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			tick.Stop()
			return err
		}
		p.lat = append(p.lat, time.Since(start))
	}
	tick.Stop()
	p.busy += busyBetween(t0, cpuTimes())
	for range 3 {
		d, err := timed(exec.Command("sh", "-c", cpuTask))
		if err != nil {
			return err
		}
		p.tasks = append(p.tasks, d)
	}
	if burner != nil {
		_ = burner.Wait() // timeout ends it (exit 124)
	}
	return nil
}

// coordinatorCPU is each sandbox's coordinator CPU time per second of
// wall time over 10 s while the sandbox idles (one session holding it).
func (b *bench) coordinatorCPU(boxes []*sandbox) []float64 {
	pids := make([]int, len(boxes))
	t0 := make([]float64, len(boxes))
	for i, s := range boxes {
		if st, err := b.status(s); err == nil {
			pids[i], t0[i] = st.pid, procCPU(st.pid)
		}
	}
	start := time.Now()
	time.Sleep(10 * time.Second)
	wall := time.Since(start).Seconds()
	out := make([]float64, len(boxes))
	for i, pid := range pids {
		if pid > 0 {
			out[i] = (procCPU(pid) - t0[i]) / wall
		}
	}
	return out
}

// execs times n warm execs of `true` in each sandbox and in the bare
// container, alternated.
func (b *bench) execs(boxes []*sandbox, n int) (map[string][]time.Duration, error) {
	times := map[string][]time.Duration{}
	cmds := func() map[string]*exec.Cmd {
		m := map[string]*exec.Cmd{"bare": exec.Command("podman", "exec", b.bare, "true")}
		for _, s := range boxes {
			m[s.name] = b.lz(s, "exec", s.profile, "--", "true")
		}
		return m
	}
	for range n {
		for name, cmd := range cmds() {
			d, err := timed(cmd)
			if err != nil {
				return nil, err
			}
			times[name] = append(times[name], d)
		}
	}
	return times, nil
}

// builds times n builds on the host, in each sandbox and in the bare
// container, alternated, after one untimed warm-up in each.
func (b *bench) builds(boxes []*sandbox, n int) (map[string][]time.Duration, error) {
	hostWS := filepath.Join(b.root, "wshost")
	if err := os.MkdirAll(hostWS, 0o755); err != nil {
		return nil, err
	}
	env := "GOROOT=" + b.goroot
	places := map[string]func() *exec.Cmd{
		"host": func() *exec.Cmd {
			c := exec.Command("sh", "-c", buildScript)
			c.Dir, c.Env = hostWS, append(os.Environ(), env)
			return c
		},
		"bare": func() *exec.Cmd { return exec.Command("podman", "exec", "-e", env, b.bare, "sh", "-c", buildScript) },
	}
	for _, s := range boxes {
		places[s.name] = func() *exec.Cmd {
			return b.lz(s, "exec", s.profile, "--", "env", env, "sh", "-c", buildScript)
		}
	}
	times := map[string][]time.Duration{}
	for i := range n + 1 {
		for name, mk := range places {
			d, err := timedBuild(mk())
			if err != nil {
				return nil, fmt.Errorf("build, %s: %w", name, err)
			}
			if i > 0 {
				times[name] = append(times[name], d)
			}
		}
	}
	return times, nil
}

func (b *bench) print(probes []probe, idleCPU []float64, execs, builds map[string][]time.Duration, execN, buildN int, load0 string) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Printf("\n### Resource limits (%s, %d cores, load average %s at the start, %s at the end)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), load0, loadAvg())
	fmt.Printf("Host-side latency probe: `true` spawned on the host every 100 ms for %s, then a CPU task on the host 3 times, in each phase; %d rounds of the phases, rotated (%d spawns, %d tasks a phase):\n\n",
		b.probeFor, b.rounds, b.rounds*int(b.probeFor/(100*time.Millisecond)), 3*b.rounds)
	fmt.Println("| phase | spawn median | spawn p99 | median / idle | p99 / idle | host CPU task (a shell loop at nice 0), median | task / idle | host CPUs busy | nice of the sandbox's runsc processes |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, p := range probes {
		fmt.Printf("| %s | %s | %s | %.2f | %.2f | %s | %.2f | %.0f%% | %s |\n", p.name, ms(p.median), ms(p.p99),
			float64(p.median)/float64(probes[0].median), float64(p.p99)/float64(probes[0].p99),
			ms(p.task), float64(p.task)/float64(probes[0].task), p.busy*100, p.nice)
	}
	fmt.Printf("\nThe watchdog's cost (warm exec: median of %d; build: median of %d, alternated; coordinator CPU: 10 s idle):\n\n", execN, buildN)
	fmt.Println("| where | warm `exec -- true` | ratio to bare `podman exec` | `go build strconv` | ratio to bare | ratio to the host | coordinator CPU, idle |")
	fmt.Println("|---|---|---|---|---|---|---|")
	bare, bareB, host := median(execs["bare"]), median(builds["bare"]), median(builds["host"])
	for i, name := range []string{"lazaret, memory = \"2g\"", "lazaret, limits at their defaults"} {
		e, bl := median(execs[name]), median(builds[name])
		fmt.Printf("| %s | %s | %.2f | %.1f s | %.2f | %.2f | %.2f%% of a core |\n", name, ms(e), float64(e)/float64(bare), bl.Seconds(), float64(bl)/float64(bareB), float64(bl)/float64(host), idleCPU[i]*100)
	}
	fmt.Printf("| bare podman + runsc (`podman exec`) | %s | 1.00 | %.1f s | 1.00 | %.2f | |\n", ms(bare), bareB.Seconds(), float64(bareB)/float64(host))
	fmt.Printf("| host | | | %.1f s | | 1.00 | |\n", host.Seconds())
}

func timed(cmd *exec.Cmd) (time.Duration, error) {
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, errb.String())
	}
	return d, nil
}

// timedBuild runs cmd and returns the build time it printed.
func timedBuild(cmd *exec.Cmd) (time.Duration, error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, errb.String())
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(l, "build-ns "); ok {
			ns, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(ns), err
		}
	}
	return 0, fmt.Errorf("no build time in the output: %s", out.String())
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// cpuTimes is /proc/stat's aggregate cpu line: busy and total ticks.
func cpuTimes() [2]uint64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]uint64{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	var busy, total uint64
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseUint(f, 10, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return [2]uint64{busy, total}
}

func busyBetween(a, b [2]uint64) float64 {
	if b[1] <= a[1] {
		return 0
	}
	return float64(b[0]-a[0]) / float64(b[1]-a[1])
}

// procCPU is a process's user and system CPU time in seconds.
func procCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: utime and stime are
	// the 12th and 13th.
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100 // USER_HZ
}

// runscNice lists the distinct nice values of container's runsc sandbox
// and gofer processes (its ID is in their arguments or bundle path; not
// the `runsc exec` clients, which only wait for their command).
func runscNice(container string) string {
	id, err := exec.Command("podman", "inspect", "--format", "{{.Id}}", container).Output()
	if err != nil || len(bytes.TrimSpace(id)) == 0 {
		return "?"
	}
	cid := string(bytes.TrimSpace(id))
	out, err := exec.Command("ps", "-u", strconv.Itoa(os.Getuid()), "-o", "ni=,args=").Output()
	if err != nil {
		return "?"
	}
	var vals []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		sandbox := strings.Contains(l, " boot ") || strings.Contains(l, " gofer ")
		if len(f) >= 2 && sandbox && strings.Contains(l, cid) && !slices.Contains(vals, f[0]) {
			vals = append(vals, f[0])
		}
	}
	if len(vals) == 0 {
		return "?"
	}
	return strings.Join(vals, ", ")
}

// loadAvg is the 1-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
