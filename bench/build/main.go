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

func run() error {
	bin := os.Getenv("LAZARET_BIN")
	if bin == "" {
		return fmt.Errorf("LAZARET_BIN is not set")
	}
	src := os.Getenv("GOROOT_SRC")
	if src == "" {
		src = "/usr/local/go"
	}
	target := os.Getenv("BUILD_TARGET")
	if target == "" {
		target = "encoding/json"
	}
	n := 3
	if v, err := strconv.Atoi(os.Getenv("BUILD_N")); err == nil && v > 0 {
		n = v
	}
	root, err := os.MkdirTemp("", "lazaret-bench-build-")
	if err != nil {
		return err
	}
	config := filepath.Join(root, "config.toml")
	lz := func(dir string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, "lazaret"), append([]string{"--config", config}, args...)...)
		cmd.Dir = dir
		return cmd
	}
	defer func() {
		for _, d := range []string{"direct", "branch"} {
			_ = lz(filepath.Join(root, d), "stop").Run()
		}
		_ = exec.Command("podman", "unshare", "rm", "-rf", root).Run()
		_ = os.RemoveAll(root)
	}()
	// Two sandboxes of one profile at once: each workspace its own
	// persistent dirs.
	if err := os.WriteFile(config, fmt.Appendf(nil, "data_root = %q\n\n[profiles.default]\npersist = \"workspace\"\n", filepath.Join(root, "data")), 0o600); err != nil {
		return err
	}
	places := []*place{{name: "host"}, {name: "direct"}, {name: "branch"}}
	for _, p := range places {
		p.dir = filepath.Join(root, p.name)
		if err := copyTree(src, filepath.Join(p.dir, "goroot")); err != nil {
			return err
		}
	}
	if err := gitInit(places[2].dir); err != nil {
		return err
	}
	places[0].run = func(target string) (time.Duration, error) {
		return timedBuild(exec.Command("sh", "-c", buildScript, "build", target), places[0].dir)
	}
	for _, p := range places[1:] {
		// One holding session keeps the sandbox up between rounds.
		hold := lz(p.dir, "exec", "--", "sleep", "36000")
		if err := hold.Start(); err != nil {
			return err
		}
		defer func() { _ = hold.Process.Kill(); _ = hold.Wait() }()
		p.run = func(target string) (time.Duration, error) {
			return timedBuild(lz(p.dir, "exec", "--", "sh", "-c", buildScript, "build", target), p.dir)
		}
		// Warm-up (and the sandbox's start): not timed.
		if _, err := p.run(target); err != nil {
			return err
		}
	}
	if _, err := places[0].run(target); err != nil {
		return err
	}
	times := map[string][]time.Duration{}
	for i := range n {
		for j := range places {
			p := places[(i+j)%len(places)]
			d, err := p.run(target)
			if err != nil {
				return err
			}
			times[p.name] = append(times[p.name], d)
		}
	}
	host := median(times["host"])
	fmt.Printf("\n### Workspace build: `go build %s`, fresh cache (median of %d, alternated, %s)\n\n", target, n, time.Now().UTC().Format("2006-01-02 15:04 MST"))
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
	return nil
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
