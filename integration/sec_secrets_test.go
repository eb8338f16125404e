//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// secConfig is a profile whose environment carries a secret from the
// host's environment, and escalation that auto-approves echo.
const secConfig = `[escalation]
auto_approve = ["echo {args}"]

[profiles.sec]
image = "localhost/lazaret-default:latest"
env = { SEC_API_KEY = "env:LZ_TEST_SECRET", TERM = "xterm" }
`

func randomSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "lzsecret" + hex.EncodeToString(b)
}

// argvHit is a process whose command line holds a needle.
type argvHit struct {
	pid     int
	needle  string
	cmdline string
}

// scanCmdlines reads /proc/PID/cmdline of every process on the host (the
// file any local user can read) and returns those holding a needle, and
// how many processes it read.
func scanCmdlines(t *testing.T, needles ...string) ([]argvHit, int) {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var hits []argvHit
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		n++
		line := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		for _, nd := range needles {
			if strings.Contains(line, nd) {
				hits = append(hits, argvHit{pid, nd, line})
			}
		}
	}
	return hits, n
}

// lazaretProcs counts the host processes of a running sandbox whose
// command lines name them, to show the scan saw them.
func lazaretProcs(t *testing.T) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, h := range must(scanCmdlines(t, "podman exec", runscExecArgv, "conmon", "runsc", "__coordinator", "slirp4netns", "lazaret-netd")) {
		seen[h.needle]++
	}
	return seen
}

func must(h []argvHit, _ int) []argvHit { return h }

// runscExecArgv is in the argv of the runsc exec that runs a session's
// command without podman (internal/adapter/runscexec): its process spec, with
// the environment, is on a pipe.
const runscExecArgv = " exec --process /dev/fd/"

// bgRun is a lazaret run in the background whose stdout is watched.
type bgRun struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func startBG(t *testing.T, e *Env, args ...string) *bgRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	r := &bgRun{cmd: e.Cmd(ctx, args...), done: make(chan struct{})}
	pr, pw := io.Pipe()
	r.cmd.Stdout, r.cmd.Stderr = pw, pw
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			r.mu.Lock()
			r.out.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
		}
	}()
	go func() { _ = r.cmd.Wait(); pw.Close(); close(r.done) }()
	t.Cleanup(func() { _ = r.cmd.Process.Kill(); <-r.done })
	return r
}

func (r *bgRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// TestSecretsNotInArgv: while a `lazaret exec` and a `lazaret shell` run,
// no process on the host has the profile's secret or a delegated key on
// its command line; the sandbox still gets the secret, and escalation
// still works. Control: a process given the secret on its argv the old
// way (podman exec --env NAME=value) is found by the same scan.
func TestSecretsNotInArgv(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig(secConfig)
	secret := randomSecret(t)
	e.ExtraEnv = append(e.ExtraEnv, "LZ_TEST_SECRET="+secret)
	needles := []string{secret, "LAZARET_DELEGATED_KEY", "LAZARET_DELEGATION"}

	// The secret's hash, not the secret: the test's own command line is
	// scanned too.
	sum := sha256.Sum256([]byte(secret))
	bg := startBG(t, e, "exec", "sec", "--", "sh", "-c",
		`printf %s "$SEC_API_KEY" | sha256sum; env | grep -c '^LAZARET_DELEGATED_KE[Y]='; lazaret-escalate -- echo escalated; `+escTiming+` echo ready; exec sleep 1000`)
	Eventually(t, 3*time.Minute, "the exec session to be ready", func() bool { return strings.Contains(bg.output(), "ready") })
	if out := bg.output(); !strings.Contains(out, hex.EncodeToString(sum[:])) || !strings.Contains(out, "\n0\n") || !strings.Contains(out, "escalated") {
		t.Fatalf("in the sandbox: %s", out)
	}
	logEscTiming(t, bg.output())
	sh := startPTY(t, e, "shell", "sec")
	sh.send("echo shell-$((6*7))\r")
	sh.waitFor("shell-42")

	hits, n := scanCmdlines(t, needles...)
	for _, h := range hits {
		if h.pid != os.Getpid() {
			t.Errorf("pid %d has %s on its command line: %s", h.pid, h.needle, h.cmdline)
		}
	}
	seen := lazaretProcs(t)
	t.Logf("scanned %d processes; sandbox processes seen: %v", n, seen)
	for _, want := range []string{"conmon", "runsc", "__coordinator"} {
		if seen[want] == 0 {
			t.Errorf("the scan saw no %q process: it does not cover the session", want)
		}
	}
	// The sessions' commands run under a runsc exec the CLI starts, or
	// under podman exec (LAZARET_EXEC_PATH=podman, an older coordinator).
	if seen["podman exec"]+seen[runscExecArgv] == 0 {
		t.Errorf("the scan saw neither a podman exec nor a runsc exec process: it does not cover the session")
	}

	// Control: the old way puts the value on podman's argv, and the scan
	// finds it there.
	ctr := strings.TrimSpace(mustPodman(t, "ps", "--filter", "label=lazaret.data_root="+e.DataRoot, "--filter", "label=lazaret.profile=sec", "--format", "{{.Names}}"))
	old := exec.Command("podman", "exec", "--env", "SEC_API_KEY="+secret, ctr, "sleep", "60")
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Process.Kill(); _ = old.Wait() }()
	Eventually(t, time.Minute, "the control's secret on an argv", func() bool {
		hits, _ := scanCmdlines(t, secret)
		for _, h := range hits {
			if h.pid == old.Process.Pid {
				return true
			}
		}
		return false
	})
}

// escTiming runs 21 auto-approved escalations through the session
// holder with the front end's trace on: its "fe-begin" and "fe-end" lines
// (wall clock, µs) time each round trip from the front end's start, for
// the log (not a threshold); they appear only when the holder answered.
const escTiming = `for i in $(seq 21); do LAZARET_ESCALATE_TRACE=1 lazaret-escalate -- echo t 2>&1 >/dev/null | grep '^trace fe-' | tr '\n' ' '; echo; done;`

func logEscTiming(t *testing.T, out string) {
	var us []int
	for _, line := range strings.Split(out, "\n") {
		var b, e int64
		if n, _ := fmt.Sscanf(line, "trace fe-begin %d trace fe-end %d", &b, &e); n == 2 {
			us = append(us, int(e-b))
		}
	}
	if len(us) == 0 {
		t.Errorf("no escalation timings in %q", out)
		return
	}
	slices.Sort(us)
	t.Logf("escalation through the session holder, %d runs (front end's trace): median %.1f ms, min %.1f ms, max %.1f ms",
		len(us), float64(us[len(us)/2])/1000, float64(us[0])/1000, float64(us[len(us)-1])/1000)
}

func mustPodman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := Podman(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
