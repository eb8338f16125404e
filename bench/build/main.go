// Command build benchmarks a compile-heavy build whose sources and outputs
// live in the Agent Workspace: `go build` of a standard-library target
// (BUILD_TARGET, default encoding/json: the runtime, reflect, strconv,
// unicode and the rest it imports) from a copy of the Go tree kept in the
// workspace (GOROOT_SRC, default /usr/local/go), with a fresh
// build cache in the workspace every round, so every package is compiled.
// It is timed in three places, alternated round by round so machine load
// hits all alike:
//
//   - host: the same command in a copy on the host, no sandbox;
//   - direct: `lazaret exec` in a workspace that is not a git repository
//     (the workspace is bind-mounted);
//   - branch: `lazaret exec` in a git repository (the Git Sentry's agent
//     clone is the workspace).
//
// The time is taken inside the command (date before and after go build),
// so lazaret's exec overhead is not in it. Each sandbox is kept running by
// one holding session. It prints a markdown table of medians and ratios
// to the host. It runs as the unprivileged podman user with LAZARET_BIN
// naming the built binaries and GOROOT_SRC a Go installation to copy
// (default /usr/local/go); BUILD_N sets the rounds (default 3).
//
// Two options for measuring one variable at a time (docs/PERFORMANCE.md,
// #20): BUILD_RUNSC_FLAGS, extra global runsc flags (space-separated) that
// a wrapper of the lazaret-runsc shim appends after lazaret's own (later
// flags win; they reach every runsc the shim starts, not the CLI's own
// runsc exec, which reads the running sandbox's state), and BUILD_PLACES,
// the places to time (default "host direct branch"; the host is always
// timed, as the reference of the ratios).
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/build:", err)
		os.Exit(1)
	}
}

// buildScript builds $1 with the Go tree in ./goroot and a fresh cache in
// ./.bench-cache, and prints the nanoseconds it took.
const buildScript = `set -e
export GOROOT="$PWD/goroot" GOCACHE="$PWD/.bench-cache" GOTOOLCHAIN=local GOENV=off CGO_ENABLED=0 GOFLAGS=
rm -rf "$GOCACHE"
s=$(date +%s%N)
"$GOROOT/bin/go" build -o /dev/null "$1"
e=$(date +%s%N)
rm -rf "$GOCACHE"
echo "build-ns $((e-s))"`

type place struct {
	name, dir string
	run       func(target string) (time.Duration, error)
}

// lazaretIn runs the lazaret under test with the bench's configuration.
type lazaretIn struct {
	bin, config string
	env         []string
}

func (l lazaretIn) cmd(dir string, args ...string) *exec.Cmd {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil && len(args) > 0 && args[0] == "exec" {
		// The direct place is no repository: lazaret asks for consent.
		args = append([]string{"exec", "--direct"}, args[1:]...)
	}
	cmd := exec.Command(filepath.Join(l.bin, "lazaret"), append([]string{"--config", l.config}, args...)...)
	cmd.Dir = dir
	cmd.Env = l.env
	return cmd
}

// startPlaces sets each place's build: the host's (places[0]) directly,
// the others in a sandbox held up by one session each (appended to
// holds), and runs each once untimed (the warm-up, and the sandbox's
// start).
func startPlaces(places []*place, lz func(string, ...string) *exec.Cmd, target string, holds *[]*exec.Cmd) error {
	places[0].run = func(target string) (time.Duration, error) {
		return timedBuild(exec.Command("sh", "-c", buildScript, "build", target), places[0].dir)
	}
	for _, p := range places[1:] {
		hold := lz(p.dir, "exec", "--", "sleep", "36000")
		if err := hold.Start(); err != nil {
			return err
		}
		*holds = append(*holds, hold)
		p.run = func(target string) (time.Duration, error) {
			return timedBuild(lz(p.dir, "exec", "--", "sh", "-c", buildScript, "build", target), p.dir)
		}
		if _, err := p.run(target); err != nil {
			return fmt.Errorf("%s, warm-up: %w", p.name, err)
		}
	}
	if _, err := places[0].run(target); err != nil {
		return fmt.Errorf("%s, warm-up: %w", places[0].name, err)
	}
	return nil
}

func run() error {
	bin := os.Getenv("LAZARET_BIN")
	if bin == "" {
		return fmt.Errorf("LAZARET_BIN is not set")
	}
	src := os.Getenv("GOROOT_SRC")
	if src == "" {
		src = "/usr/local/go"
	}
	target, n := os.Getenv("BUILD_TARGET"), 3
	if target == "" {
		target = "encoding/json"
	}
	if v, err := strconv.Atoi(os.Getenv("BUILD_N")); err == nil && v > 0 {
		n = v
	}
	root, err := os.MkdirTemp("", "lazaret-bench-build-")
	if err != nil {
		return err
	}
	config := filepath.Join(root, "config.toml")
	env, err := shimEnv(root, bin, os.Getenv("BUILD_RUNSC_FLAGS"))
	if err != nil {
		return err
	}
	lz := lazaretIn{bin: bin, config: config, env: env}.cmd
	var holds []*exec.Cmd
	defer func() {
		// Stop while the holding sessions are attached: stop then waits
		// for the teardown. Killing the holders first would start the
		// teardown on its own, stop would return at once, and the rm
		// below could take the runtime wrapper (BUILD_RUNSC_FLAGS) away
		// before podman removed the container with it.
		for _, d := range []string{"direct", "branch"} {
			_ = lz(filepath.Join(root, d), "stop").Run()
		}
		for _, h := range holds {
			_ = h.Process.Kill()
			_ = h.Wait()
		}
		_ = exec.Command("podman", "unshare", "rm", "-rf", root).Run()
		_ = os.RemoveAll(root)
	}()
	// Two sandboxes of one profile at once: each workspace its own
	// persistent dirs.
	if err := os.WriteFile(config, fmt.Appendf(nil, "data_root = %q\n\n[profiles.default]\npersist = \"workspace\"\n", filepath.Join(root, "data")), 0o600); err != nil {
		return err
	}
	places, err := placesFrom(os.Getenv("BUILD_PLACES"))
	if err != nil {
		return err
	}
	if err := prepare(places, root, src); err != nil {
		return err
	}
	load0 := loadAvg()
	if err := startPlaces(places, lz, target, &holds); err != nil {
		return err
	}
	times, err := rounds(places, target, n)
	if err != nil {
		return err
	}
	printTable(places, times, target, n, load0)
	return nil
}

// prepare gives every place its copy of the Go tree under root (the
// branch place's committed in a repository).
func prepare(places []*place, root, src string) error {
	for _, p := range places {
		p.dir = filepath.Join(root, p.name)
		if err := copyTree(src, filepath.Join(p.dir, "goroot")); err != nil {
			return err
		}
		if p.name == "branch" {
			if err := gitInit(p.dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// rounds times n builds in every place, the order rotated round by round.
func rounds(places []*place, target string, n int) (map[string][]time.Duration, error) {
	times := map[string][]time.Duration{}
	for i := range n {
		for j := range places {
			p := places[(i+j)%len(places)]
			d, err := p.run(target)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", p.name, i+1, err)
			}
			times[p.name] = append(times[p.name], d)
		}
	}
	return times, nil
}

// printTable prints the markdown table of medians and ratios to the host.
func printTable(places []*place, times map[string][]time.Duration, target string, n int, load0 string) {
	host := median(times["host"])
	fmt.Printf("\n### Workspace build: `go build %s`, fresh cache (median of %d, alternated, %s)\n\n", target, n, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("runsc flags added: %q; load average %s at the start, %s at the end\n\n", os.Getenv("BUILD_RUNSC_FLAGS"), load0, loadAvg())
	fmt.Println("| where | median | all rounds | ratio to the host | goal |")
	fmt.Println("|---|---|---|---|---|")
	for _, p := range places {
		m := median(times[p.name])
		var all []string
		for _, d := range times[p.name] {
			all = append(all, fmt.Sprintf("%.1f", d.Seconds()))
		}
		goal := "≤ 1.3 (1.2)"
		if p.name == "host" {
			goal = ""
		}
		fmt.Printf("| %s | %.1f s | %s | %.2f | %s |\n", p.name, m.Seconds(), strings.Join(all, " / "), float64(m)/float64(host), goal)
	}
}

// placesFrom returns the places BUILD_PLACES names, the host first.
func placesFrom(spec string) ([]*place, error) {
	if spec == "" {
		spec = "host direct branch"
	}
	places := []*place{{name: "host"}}
	for _, n := range strings.Fields(spec) {
		switch n {
		case "host":
		case "direct", "branch":
			places = append(places, &place{name: n})
		default:
			return nil, fmt.Errorf("BUILD_PLACES: unknown place %q (host, direct, branch)", n)
		}
	}
	return places, nil
}

// shimEnv returns lazaret's environment: with extra runsc flags, a
// wrapper of the shim in root that appends them, named by LAZARET_SHIM.
func shimEnv(root, bin, flags string) ([]string, error) {
	env := os.Environ()
	if strings.TrimSpace(flags) == "" {
		return env, nil
	}
	for _, f := range strings.Fields(flags) {
		if !strings.HasPrefix(f, "--") || strings.ContainsAny(f, "'\\\"$`") {
			return nil, fmt.Errorf("BUILD_RUNSC_FLAGS: %q is not a --flag[=value]", f)
		}
	}
	wrapper := filepath.Join(root, "lazaret-runsc")
	script := fmt.Sprintf("#!/bin/bash\nexec -a lazaret-runsc '%s' %s \"$@\"\n", filepath.Join(bin, "lazaret-runsc"), flags)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return nil, err
	}
	return append(env, "LAZARET_SHIM="+wrapper), nil
}

// loadAvg is the 1-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// timedBuild runs cmd in dir and returns the build time it printed.
func timedBuild(cmd *exec.Cmd, dir string) (time.Duration, error) {
	cmd.Dir = dir
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

// copyTree copies the parts of a Go installation a build needs.
func copyTree(src, dst string) error {
	if err := os.MkdirAll(filepath.Join(dst, "pkg"), 0o755); err != nil {
		return err
	}
	for _, p := range []string{"bin", "src", "VERSION", "go.env", "pkg/tool", "pkg/include"} {
		if _, err := os.Stat(filepath.Join(src, p)); err != nil {
			continue
		}
		if out, err := exec.Command("cp", "-a", filepath.Join(src, p), filepath.Join(dst, p)).CombinedOutput(); err != nil {
			return fmt.Errorf("copying %s: %v: %s", p, err, out)
		}
	}
	return nil
}

// gitInit makes dir a repository with everything committed (branch mode).
func gitInit(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(".bench-cache/\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=bench", "-c", "user.email=bench@invalid", "commit", "-q", "-m", "tree"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, out)
		}
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
