// Command lifecycle benchmarks the sandbox lifecycle against bare podman
// with the same runsc (through the same lazaret-runsc shim, so the same
// runsc flags), interleaving the two in one run so machine load affects
// both alike, and prints a markdown table of medians and ratios:
//
//   - cold: `lazaret exec default -- true` with no sandbox running (the
//     spare network sidecar the previous sandbox left claimed) vs
//     `podman run --rm … localhost/lazaret-default true`;
//   - cold, first: the same after `lazaret stop`, which removes the spare
//     (a domain's first start);
//   - warm: `lazaret exec -- true` with the sandbox running vs
//     `podman exec <container> true`;
//   - both again with the command through podman exec instead of runsc
//     exec (LAZARET_EXEC_PATH=podman), in the same rounds;
//   - cold again with the start gate off (LAZARET_START_GATE=off: the
//     State Anchor's mounts and the namespace pin before podman run);
//   - teardown: from the last CLI's exit until the coordinator has removed
//     the container and its control socket;
//   - idle coordinator RSS.
//
// It runs as the unprivileged podman user with LAZARET_BIN naming the
// built binaries (scripts/bench). LIFECYCLE_N sets the rounds (default 7).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

const image = "localhost/lazaret-default"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/lifecycle:", err)
		os.Exit(1)
	}
}

type bench struct {
	bin, config, ws string
	// sock is the domain's control socket, ctr its container, shim the runsc shim.
	sock, ctr, shim string
}

func (b *bench) lazaret(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(b.bin, "lazaret"), append([]string{"--config", b.config}, args...)...)
	cmd.Dir = b.ws
	return cmd
}

// viaPodman makes a lazaret exec run its command with podman exec instead
// of runsc exec (internal/cli, LAZARET_EXEC_PATH).
func viaPodman(cmd *exec.Cmd) *exec.Cmd {
	cmd.Env = append(os.Environ(), "LAZARET_EXEC_PATH=podman")
	return cmd
}

// withoutGate makes the coordinator mount and pin before the agent's
// podman run instead of behind the start gate (LAZARET_START_GATE=off).
func withoutGate(cmd *exec.Cmd) *exec.Cmd {
	cmd.Env = append(os.Environ(), "LAZARET_START_GATE=off")
	return cmd
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

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func run() error {
	bin := os.Getenv("LAZARET_BIN")
	if bin == "" {
		return fmt.Errorf("LAZARET_BIN is not set")
	}
	n := 7
	if v, err := strconv.Atoi(os.Getenv("LIFECYCLE_N")); err == nil && v > 0 {
		n = v
	}
	root, err := os.MkdirTemp("", "lazaret-bench-lifecycle-")
	if err != nil {
		return err
	}
	defer func() {
		_ = exec.Command("podman", "unshare", "rm", "-rf", root).Run()
		_ = os.RemoveAll(root)
	}()
	b := &bench{bin: bin, config: filepath.Join(root, "config.toml"), ws: filepath.Join(root, "ws")}
	if err := os.MkdirAll(b.ws, 0o755); err != nil {
		return err
	}
	// The workspace is no repository: direct mode, consented to in the
	// profile (a start without a terminal needs it).
	if err := os.WriteFile(b.config, fmt.Appendf(nil, "data_root = %q\n\n[profiles.default]\ngit_mode = \"direct\"\n", filepath.Join(root, "data")), 0o600); err != nil {
		return err
	}
	defer b.lazaret("stop", "--all").Run()
	var dom struct {
		Resources map[string]string `json:"resources"`
	}
	out, err := b.lazaret("domain", "--json").Output()
	if err != nil {
		return fmt.Errorf("lazaret domain: %w", err)
	}
	if err := json.Unmarshal(out, &dom); err != nil {
		return err
	}
	b.sock, b.ctr, b.shim = dom.Resources["control_socket"], dom.Resources["container"], filepath.Join(bin, "lazaret-runsc")
	var r results
	if err := b.coldRounds(n, &r); err != nil {
		return err
	}
	if err := b.warmRounds(n, &r); err != nil {
		return err
	}
	_ = b.lazaret("stop").Run()
	report(n, &r, startBreakdown(dom.Resources["coordinator_log"]))
	return nil
}

// results are the rounds' timings.
type results struct {
	bare, bareWorkdir, cold, coldFirst, coldPodman, coldNoGate, teardown []time.Duration
	pexec, warm, warmPodman                                              []time.Duration
	rss                                                                  int
}

// bareRun is `podman run` of the image through the shim, extra flags first.
func (b *bench) bareRun(extra ...string) *exec.Cmd {
	args := append([]string{"run", "--rm", "--pull=never", "--runtime", b.shim, "--network", "none"}, extra...)
	return exec.Command("podman", append(args, image, "true")...)
}

// coldExec times one cold `lazaret exec … true` (through wrap) and waits
// for its coordinator to exit.
func (b *bench) coldExec(wrap func(*exec.Cmd) *exec.Cmd) (time.Duration, error) {
	d, err := timed(wrap(b.lazaret("exec", "default", "--", "true")))
	if err != nil {
		return 0, err
	}
	if !waitGone(b.sock, 30*time.Second) {
		return 0, fmt.Errorf("the coordinator did not exit within 30s")
	}
	return d, nil
}

func same(c *exec.Cmd) *exec.Cmd { return c }

// coldRounds times n rounds of cold starts, each against bare podman runs.
func (b *bench) coldRounds(n int, r *results) error {
	// Warm-up: first runs pay for page cache and podman's storage.
	if _, err := timed(b.bareRun()); err != nil {
		return err
	}
	if _, err := timed(b.lazaret("exec", "default", "--", "true")); err != nil {
		return err
	}
	waitGone(b.sock, 30*time.Second)
	for range n {
		// A first start: no spare sidecar (stop removes it); its
		// teardown leaves one for the cold start below.
		if err := b.lazaret("stop").Run(); err != nil {
			return fmt.Errorf("lazaret stop: %w", err)
		}
		d, err := b.coldExec(same)
		if err != nil {
			return err
		}
		r.coldFirst = append(r.coldFirst, d)
		if d, err = timed(b.bareRun()); err != nil {
			return err
		}
		r.bare = append(r.bare, d)
		// The same with a working directory, as lazaret's own runs have:
		// podman 4 then skips its two look-ups of the image's
		// /etc/passwd (each a re-exec of podman).
		if d, err = timed(b.bareRun("--workdir", "/")); err != nil {
			return err
		}
		r.bareWorkdir = append(r.bareWorkdir, d)
		if d, err = timed(b.lazaret("exec", "default", "--", "true")); err != nil {
			return err
		}
		r.cold = append(r.cold, d)
		exited := time.Now()
		if !waitGone(b.sock, 30*time.Second) {
			return fmt.Errorf("the coordinator did not exit within 30s")
		}
		r.teardown = append(r.teardown, time.Since(exited))
		// The same with the command through podman exec (the path before
		// runsc exec became the default), and with the start gate off
		// (the sequential start before it).
		if d, err = b.coldExec(viaPodman); err != nil {
			return err
		}
		r.coldPodman = append(r.coldPodman, d)
		if d, err = b.coldExec(withoutGate); err != nil {
			return err
		}
		r.coldNoGate = append(r.coldNoGate, d)
	}
	return nil
}

// warmRounds times n rounds of commands while one session holds the
// sandbox, and the idle coordinator's RSS.
func (b *bench) warmRounds(n int, r *results) error {
	holder := b.lazaret("exec", "--", "sleep", "3600")
	if err := holder.Start(); err != nil {
		return err
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var st struct {
		Status *struct {
			PID      int               `json:"pid"`
			Sessions []json.RawMessage `json:"sessions"`
		} `json:"status"`
	}
	for st.Status == nil || len(st.Status.Sessions) == 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("the holding session did not attach")
		}
		time.Sleep(100 * time.Millisecond)
		if out, err := b.lazaret("status", "--json").Output(); err == nil {
			_ = json.Unmarshal(out, &st)
		}
	}
	for range n {
		d, err := timed(exec.Command("podman", "exec", b.ctr, "true"))
		if err != nil {
			return err
		}
		r.pexec = append(r.pexec, d)
		if d, err = timed(b.lazaret("exec", "--", "true")); err != nil {
			return err
		}
		r.warm = append(r.warm, d)
		if d, err = timed(viaPodman(b.lazaret("exec", "--", "true"))); err != nil {
			return err
		}
		r.warmPodman = append(r.warmPodman, d)
	}
	time.Sleep(time.Second) // idle
	r.rss = rssKB(st.Status.PID)
	return nil
}

// report prints the medians as PERFORMANCE.md's tables.
func report(n int, r *results, breakdown map[string][]time.Duration) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	row := func(what string, a, base []time.Duration, goal string) {
		fmt.Printf("| %s | %s | %s | %.2f | %s |\n", what, ms(median(a)), ms(median(base)), float64(median(a))/float64(median(base)), goal)
	}
	fmt.Printf("\n### Lifecycle (median of %d, interleaved, %s)\n\n", n, time.Now().UTC().Format("2006-01-02"))
	fmt.Println("| measurement | lazaret | bare podman + runsc | ratio | goal |")
	fmt.Println("|---|---|---|---|---|")
	row("cold `exec default -- true` (the spare sidecar the last sandbox left, claimed) vs `podman run --rm … true`", r.cold, r.bare, "≤ 1.0")
	row("cold, a first start (no spare: after `lazaret stop`)", r.coldFirst, r.bare, "")
	row("the same cold start vs `podman run --rm --workdir / … true` (podman then skips its /etc/passwd look-ups, as lazaret's runs do)", r.cold, r.bareWorkdir, "")
	row("cold, the command through podman exec (`LAZARET_EXEC_PATH=podman`)", r.coldPodman, r.bare, "")
	row("cold, the start gate off (`LAZARET_START_GATE=off`: mounts and pin before podman run)", r.coldNoGate, r.bare, "")
	row("warm `exec -- true` vs `podman exec <ctr> true`", r.warm, r.pexec, "≤ 1.05")
	row("warm, through podman exec (`LAZARET_EXEC_PATH=podman`)", r.warmPodman, r.pexec, "")
	fmt.Printf("| teardown after the last CLI exits (leaving the spare sidecar included) | %s | | | ≤ 3 s |\n", ms(median(r.teardown)))
	fmt.Printf("| idle coordinator RSS | %.1f MB | | | ≤ 30 MB |\n", float64(r.rss)/1024)
	fmt.Printf("\nCold start inside the coordinator (median of the cold rounds; components are prepared concurrently):\n\n")
	fmt.Println("| step | median |")
	fmt.Println("|---|---|")
	keys := make([]string, 0, len(breakdown))
	for k := range breakdown {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Printf("| %s | %s |\n", k, ms(median(breakdown[k])))
	}
}

var (
	logLine  = regexp.MustCompile(`msg="([^"]+)"(.*)$`)
	logField = regexp.MustCompile(`(\w+)=("[^"]*"|\S+)`)
)

// startBreakdown reads the coordinator log of the benchmark's domain and
// collects, per start, the time of each component's Prepare, of the agent
// container's podman run and of the whole start.
func startBreakdown(path string) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	data, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(data), "\n") {
		m := logLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		f := map[string]string{}
		for _, kv := range logField.FindAllStringSubmatch(m[2], -1) {
			f[kv[1]] = strings.Trim(kv[2], `"`)
		}
		var key, val string
		switch m[1] {
		case "component prepared":
			key, val = "prepare "+f["component"], f["took"]
		case "component ready":
			key, val = "ready "+f["component"]+" (deferred work, after the agent's podman run began; the start gate waits for it)", f["after_run"]
		case "component started":
			key, val = "started "+f["component"]+" (after the agent's podman run began)", f["after_run"]
		case "container started":
			key, val = "agent container `podman run -d`", f["took"]
		case "sandbox running":
			key, val = "whole start (coordinator started → sandbox running)", f["after"]
		default:
			continue
		}
		if d, err := time.ParseDuration(val); err == nil {
			out[key] = append(out[key], d)
		}
	}
	return out
}

// waitGone waits until path no longer exists (the coordinator unlinks its
// socket last).
func waitGone(path string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !exists(path) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func rssKB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	return 0
}
