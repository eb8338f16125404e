//go:build bench

// Package git benchmarks `git status` in the Agent Sandbox's branch-mode
// workspace (the Git Sentry layout: agent clone, its own .git mount, the
// host .git read-only as the object alternate) on a generated repository
// of 20,000 files, against the same command on the host in the same run,
// for several runsc file-system options. Run by `make bench`
// (scripts/bench) as the unprivileged user; prints a markdown table for
// docs/PERFORMANCE.md ("Git").
package git

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/gitsentry"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/insandbox/fsmonitor"
)

const (
	nDirs    = 200
	perDir   = 100 // nDirs*perDir = 20,000 files
	warmRuns = 5
	rounds   = 3
	image    = "localhost/lazaret-default:latest"
)

// timedStatus runs git status --porcelain n times inside one bash and
// prints the nanoseconds of each run (podman exec overhead excluded; the
// clock is bash's $EPOCHREALTIME, so no process start is timed besides
// git's own and its hook's).
const timedStatus = `cd /workspace
for i in $(seq %d); do
  t0=${EPOCHREALTIME/./}; git %s status --porcelain >/dev/null; t1=${EPOCHREALTIME/./}; echo $(( (t1-t0)*1000 ))
done`

// timedSpawn times, in the same way, starting /bin/true and one query of
// the fsmonitor hook (what git adds to each status with the fsmonitor).
const timedSpawn = `cd /workspace
for i in $(seq %d); do
  t0=${EPOCHREALTIME/./}; /bin/true; t1=${EPOCHREALTIME/./}; ` + gitsentry.ContainerFSMonitorBin + ` 2 x >/dev/null; t2=${EPOCHREALTIME/./}
  echo $(( (t1-t0)*1000 )) $(( (t2-t1)*1000 ))
done`

func run(b *testing.B, dir string, name string, args ...string) string {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

// makeRepo writes and commits nDirs*perDir small files.
func makeRepo(b *testing.B, dir string) {
	for d := 0; d < nDirs; d++ {
		sub := filepath.Join(dir, "src", fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < perDir; f++ {
			content := fmt.Sprintf("package pkg%03d\n\n// file %d\nvar V%d = %d\n", d, f, f, d*perDir+f)
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.go", f)), []byte(content), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	run(b, dir, "git", "init", "-q", "-b", "main")
	run(b, dir, "git", "add", "-A")
	run(b, dir, "git", "commit", "-q", "-m", "generated")
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func parseTimes(b *testing.B, out string) []time.Duration {
	var ds []time.Duration
	for _, f := range strings.Fields(out) {
		ns, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("bad timing %q in %q", f, out)
		}
		ds = append(ds, time.Duration(ns))
	}
	return ds
}

type variant struct {
	name    string
	fsmon   bool     // the Git Sentry's fsmonitor (lazaret's default since it exists)
	runtime string   // "runsc" or "crun"
	flags   []string // runsc flags (podman --runtime-flag)
	hints   bool     // share=container hints on the clone mounts (loses writes; for the record)
	gitArgs string   // extra git options
}

func BenchmarkGitStatus20k(b *testing.B) {
	runsc := os.Getenv("LAZARET_RUNSC")
	if runsc == "" {
		runsc = "/usr/local/lib/lazaret/runsc"
	}
	root, err := os.MkdirTemp("", "lzbench-git-")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = exec.Command("podman", "unshare", "rm", "-rf", root).Run()
		_ = os.RemoveAll(root)
	}()
	ws := filepath.Join(root, "ws")
	os.MkdirAll(ws, 0o755)
	makeRepo(b, ws)

	// Host baseline (warm), measured again beside every variant: the
	// machine is shared, and a ratio is only fair within one time window.
	hostStatus := func() time.Duration {
		run(b, ws, "git", "status", "--porcelain")
		var host []time.Duration
		for i := 0; i < warmRuns; i++ {
			t0 := time.Now()
			run(b, ws, "git", "status", "--porcelain")
			host = append(host, time.Since(t0))
		}
		return median(host)
	}

	ctx := context.Background()
	rt, err := domain.RuntimeDir()
	if err != nil {
		b.Fatal(err)
	}
	pc := &podman.Client{Log: slog.New(slog.DiscardHandler)}

	// lazaret's clone config sets core.untrackedCache=true; "-c
	// core.untrackedCache=false" measures git's default. Measured once and
	// left out of the rounds (docs/PERFORMANCE.md): --directfs=false
	// (30-47x) and share=container mount hints (writes never reach the
	// host, and not faster).
	const noUC = "-c core.untrackedCache=false"
	excl := []string{"file-access-mounts=exclusive"}
	variants := []variant{
		{name: "runsc default (directfs, shared access), git defaults", runtime: "runsc", gitArgs: noUC},
		{name: "runsc default + untrackedCache", runtime: "runsc"},
		{name: "runsc default + untrackedCache + fsmonitor (lazaret's defaults)", runtime: "runsc", fsmon: true},
		{name: "runsc default + fsmonitor, no untrackedCache", runtime: "runsc", fsmon: true, gitArgs: noUC},
		{name: "runsc --file-access-mounts=exclusive, git defaults", runtime: "runsc", flags: excl, gitArgs: noUC},
		{name: "runsc --file-access-mounts=exclusive + untrackedCache", runtime: "runsc", flags: excl},
		{name: "runsc exclusive + untrackedCache + fsmonitor", runtime: "runsc", flags: excl, fsmon: true},
		{name: "runsc exclusive + untrackedCache + --overlay2=none", runtime: "runsc", flags: []string{"file-access-mounts=exclusive", "overlay2=none"}},
	}
	if os.Getenv("LAZARET_BENCH_GIT_ALL") != "" {
		variants = append(variants,
			variant{name: "runsc --directfs=false", runtime: "runsc", flags: []string{"directfs=false"}},
			variant{name: "runsc share=container hints on the clone (NOT USABLE: writes never reach the host)", runtime: "runsc", hints: true})
	}
	// Every variant gets its own clone (a profile of its own) and its own
	// sandbox, all started first; then the rounds interleave the variants
	// and the host, so that load from other work on the machine hits all
	// of them alike.
	names := make([]string, len(variants))
	colds := make([]time.Duration, len(variants))
	for i, v := range variants {
		a, err := domain.New(fmt.Sprintf("bench%d", i), ws, filepath.Join(root, "data"), rt, "")
		if err != nil {
			b.Fatal(err)
		}
		comp := gitsentry.New(a, "", pc, nil)
		comp.NoFSMonitor = !v.fsmon
		if v.fsmon {
			comp.FSMonitor = filepath.Join(os.Getenv("LAZARET_BIN"), "lazaret-fsmonitor")
		}
		spec := &podman.ContainerSpec{
			Name:    fmt.Sprintf("lazaret-bench-git-%d-%d", os.Getpid(), i),
			Image:   image,
			Network: "none",
			Command: []string{"sleep", "infinity"},
		}
		if err := comp.Prepare(ctx, spec); err != nil {
			b.Fatal(err)
		}
		if v.runtime == "runsc" {
			spec.Runtime = runsc
			spec.ExtraArgs = append(spec.ExtraArgs, "--runtime-flag", "ignore-cgroups")
			for _, f := range v.flags {
				spec.ExtraArgs = append(spec.ExtraArgs, "--runtime-flag", f)
			}
		} else {
			spec.Runtime = v.runtime
		}
		if v.hints {
			for n, src := range map[string]string{"benchws": gitsentry.ClonePath(a), "benchgit": filepath.Join(gitsentry.ClonePath(a), ".git")} {
				spec.Annotations["dev.gvisor.spec.mount."+n+".source"] = src
				spec.Annotations["dev.gvisor.spec.mount."+n+".type"] = "bind"
				spec.Annotations["dev.gvisor.spec.mount."+n+".share"] = "container"
			}
		}
		inv, err := pc.RunArgs(spec)
		if err != nil {
			b.Fatal(err)
		}
		// Registered before the run: a failed start can leave a created
		// container behind.
		defer pc.RemoveContainer(context.Background(), spec.Name, 0)
		if _, err := pc.OutputInvocation(ctx, inv); err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
		names[i] = spec.Name
		if v.fsmon {
			if err := gitsentry.StartFSMonitor(ctx, pc, spec.Name); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
		}
	}
	// The daemons listen once they watch every directory.
	for i, v := range variants {
		if v.fsmon {
			waitSocket := "for i in $(seq 600); do [ -S " + fsmonitor.DefaultSocket + " ] && exit 0; sleep 0.1; done; exit 1"
			if _, err := pc.ExecOutput(ctx, names[i], "sh", "-c", waitSocket); err != nil {
				b.Fatalf("%s: the fsmonitor daemon never listened: %v", v.name, err)
			}
		}
	}
	status := func(i, n int) []time.Duration {
		out, err := pc.ExecOutput(ctx, names[i], "bash", "-c", fmt.Sprintf(timedStatus, n, variants[i].gitArgs))
		if err != nil {
			b.Fatalf("%s: %v", variants[i].name, err)
		}
		return parseTimes(b, string(out))
	}
	for i := range variants {
		colds[i] = status(i, 1)[0]
	}
	warm := make([][]time.Duration, len(variants))
	var host []time.Duration
	for r := 0; r < rounds; r++ {
		for i := range variants {
			warm[i] = append(warm[i], status(i, warmRuns)...)
			host = append(host, hostStatus())
		}
	}
	hostMed := median(host)
	var rows []string
	for i, v := range variants {
		w := median(warm[i])
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %.1f× |", v.name, colds[i].Milliseconds(), w.Milliseconds(), float64(w)/float64(hostMed)))
		b.ReportMetric(float64(w)/float64(hostMed), fmt.Sprintf("ratio-%d", i))
	}
	// Process start-up inside the sandbox: /bin/true against the hook.
	var spawnTrue, spawnHook []time.Duration
	for i, v := range variants {
		if !v.fsmon {
			continue
		}
		out, err := pc.ExecOutput(ctx, names[i], "bash", "-c", fmt.Sprintf(timedSpawn, 30))
		if err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
		ds := parseTimes(b, string(out))
		for j := 0; j+1 < len(ds); j += 2 {
			spawnTrue = append(spawnTrue, ds[j])
			spawnHook = append(spawnHook, ds[j+1])
		}
		break
	}
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "\n`git status --porcelain`, %d files; warm: median of %d rounds × %d runs, interleaved with the host (host median %d ms); cold: first run in each sandbox\n\n",
		nDirs*perDir, rounds, warmRuns, hostMed.Milliseconds())
	tbl.WriteString("| variant | cold ms | warm ms | warm / host |\n|---|---|---|---|\n")
	tbl.WriteString(strings.Join(rows, "\n") + "\n")
	if len(spawnHook) > 0 {
		fmt.Fprintf(&tbl, "\nIn the sandbox (median of %d): /bin/true %.1f ms, fsmonitor hook query %.1f ms\n",
			len(spawnHook), float64(median(spawnTrue).Microseconds())/1000, float64(median(spawnHook).Microseconds())/1000)
	}
	b.Log(tbl.String())
}
