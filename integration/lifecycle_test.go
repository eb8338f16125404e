//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// lcDomain is what the lifecycle tests need to know about their domain.
type lcDomain struct {
	Hash      string            `json:"hash"`
	Resources map[string]string `json:"resources"`
}

func domainOf(t *testing.T, e *Env, profile string) lcDomain {
	t.Helper()
	var d lcDomain
	if err := json.Unmarshal([]byte(e.MustRun("domain", "--json", "--profile", profile)), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// containersOf lists the containers labelled with the domain hash.
func containersOf(t *testing.T, hash string) []string {
	t.Helper()
	out, err := Podman(t, "ps", "-a", "--filter", "label=lazaret.domain="+hash, "--format", "{{.ID}}")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// sandboxContainersOf lists the domain's containers but the spare network
// sidecar a sandbox leaves for the next start (TestSpareSidecarLifecycle):
// what a sandbox that ended must not leave.
func sandboxContainersOf(t *testing.T, hash string) []string {
	t.Helper()
	out, err := Podman(t, "ps", "-a", "--filter", "label=lazaret.domain="+hash, "--format", `{{.ID}} {{index .Labels "lazaret.spare"}}`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	spares := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 1:
			ids = append(ids, f[0])
		case len(f) > 1:
			if spares++; spares > 1 {
				ids = append(ids, f[0]) // one spare per domain
			}
		}
	}
	return ids
}

// coordinatorPIDs returns the pids of coordinator processes of workspace.
func coordinatorPIDs(workspace string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		isCoord, ws := false, ""
		for i, a := range args {
			if a == "__coordinator" {
				isCoord = true
			}
			if a == "--workspace" && i+1 < len(args) {
				ws = args[i+1]
			}
		}
		if isCoord && ws == workspace {
			pids = append(pids, pid)
		}
	}
	return pids
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// requireGone waits until the domain has no container (but its spare
// network sidecar), socket or coordinator left.
func requireGone(t *testing.T, d lcDomain, within time.Duration) {
	t.Helper()
	ws := d.Resources["workspace"]
	Eventually(t, within, "container, socket and coordinator gone", func() bool {
		return len(sandboxContainersOf(t, d.Hash)) == 0 && !exists(d.Resources["control_socket"]) && len(coordinatorPIDs(ws)) == 0
	})
	if !exists(d.Resources["lock_file"]) {
		t.Error("the lock file was unlinked")
	}
}

// requireNoRuntimeLeftovers checks that none of the domain's runtime files
// (sockets of the components, TLS directory) outlived it: the network
// sidecar's socket and namespace pin only with the spare that holds them.
func requireNoRuntimeLeftovers(t *testing.T, d lcDomain) {
	t.Helper()
	keys := []string{"escalation_socket", "tls_dir", "ca_bundle_snapshot", "inject_bundle"}
	if len(containersOf(t, d.Hash)) == 0 {
		keys = append(keys, "netd_socket", "netns")
	}
	for _, k := range keys {
		if p := d.Resources[k]; p != "" && exists(p) {
			t.Errorf("%s left behind: %s", k, p)
		}
	}
	// The uplink of the namespace exits with its coordinator.
	if ns := d.Resources["netns"]; ns != "" {
		Eventually(t, 5*time.Second, "slirp4netns of "+ns+" to exit", func() bool { return !uplinkRunning(ns) })
	}
}

// uplinkRunning reports whether a slirp4netns serves the namespace pinned
// at ns.
func uplinkRunning(ns string) bool {
	cmds, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmds {
		if b, err := os.ReadFile(c); err == nil && strings.Contains(string(b), "slirp4netns") && strings.Contains(string(b), ns) {
			return true
		}
	}
	return false
}

func lcEnv(t *testing.T) (*Env, lcDomain) {
	e := NewEnv(t)
	d := domainOf(t, e, "default")
	d.Resources["workspace"] = canonical(t, e.Workspace)
	return e, d
}

func canonical(t *testing.T, p string) string {
	t.Helper()
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLifecycleExecRunsc(t *testing.T) {
	e, d := lcEnv(t)
	// One session holds the sandbox, so the checks below share one start
	// (the machine is shared; a cold start each would only add load).
	hold, release := io.Pipe()
	holder, _ := background(t, e, hold, "exec", "--", "cat")
	out := e.MustRun("exec", "--", "dmesg")
	if !strings.Contains(out, "gVisor") {
		t.Fatalf("the sandbox is not gVisor; dmesg:\n%s", out)
	}
	if r := e.Run("exec", "--", "sh", "-c", "exit 7"); r.Code != 7 {
		t.Fatalf("exit 7 gave %d; stderr %s", r.Code, r.Stderr)
	}
	if r := e.Run("exec", "default", "--", "sh", "-c", "echo out; echo err >&2; exit 3"); r.Code != 3 || r.Stdout != "out\n" || r.Stderr != "err\n" {
		t.Fatalf("streams: %+v", r)
	}
	if r := e.RunStdin("line one\nline two\n", "exec", "--", "sh", "-c", "tr a-z A-Z"); r.Code != 0 || r.Stdout != "LINE ONE\nLINE TWO\n" {
		t.Fatalf("stdin piping: %+v", r)
	}
	// 127 is the command's (not found), not lazaret's.
	if r := e.Run("exec", "--", "no-such-command-here"); r.Code != 127 || r.Stderr != "lazaret: no-such-command-here: command not found\n" {
		t.Fatalf("missing command gave %d; stderr %q", r.Code, r.Stderr)
	}
	if out := e.MustRun("exec", "--", "sh", "-c", "pwd; echo $LAZARET_SESSION_ID"); !regexp.MustCompile(`^/workspace\n[0-9a-f]{32}\n$`).MatchString(out) {
		t.Fatalf("workdir/session id: %q", out)
	}
	// The sandbox's task bound is enforced by gVisor as RLIMIT_NPROC.
	if out := e.MustRun("exec", "--", "grep", "^Max processes", "/proc/1/limits"); !strings.Contains(out, " 4096 ") {
		t.Errorf("process limit: %q", out)
	}
	if n := sessions(t, e); n != 1 {
		t.Errorf("%d sessions attached, want only the holder", n)
	}
	release.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	requireGone(t, d, 20*time.Second)
}

// TestLifecycleConcurrentStart starts 8 sessions at the same instant: one
// coordinator, one container, all succeed; after the last, all is gone.
func TestLifecycleConcurrentStart(t *testing.T) {
	e, d := lcEnv(t)
	const n = 8
	var wg sync.WaitGroup
	results := make([]Result, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// /run/.containerenv names the container each command ran in.
			results[i] = e.Run("exec", "--", "sh", "-c", "grep ^id= /run/.containerenv; sleep 1")
		}()
	}
	close(start)
	wg.Wait()
	ids := map[string]bool{}
	for i, r := range results {
		if r.Code != 0 {
			t.Fatalf("session %d: exit %d, stderr %s", i, r.Code, r.Stderr)
		}
		ids[strings.TrimSpace(r.Stdout)] = true
	}
	if len(ids) != 1 {
		t.Fatalf("sessions ran in %d containers: %v", len(ids), ids)
	}
	log, err := os.ReadFile(d.Resources["coordinator_log"])
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(string(log), `msg="coordinator started"`); c != 1 {
		t.Fatalf("%d coordinators started:\n%s", c, log)
	}
	if c := strings.Count(string(log), `msg="session attached"`); c != n {
		t.Fatalf("%d sessions attached, want %d:\n%s", c, n, log)
	}
	requireGone(t, d, 20*time.Second)
}

// background starts lazaret with args and returns the command and its
// stderr; the caller waits for it.
func background(t *testing.T, e *Env, stdin io.Reader, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := e.Cmd(context.Background(), args...)
	var errb bytes.Buffer
	cmd.Stdin = stdin
	cmd.Stderr = &errb
	// A test that fails before it closes stdin must not hang in Cleanup:
	// Wait would wait for the stdin copier forever.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, &errb
}

type lcStatus struct {
	Running bool `json:"running"`
	Status  *struct {
		PID      int `json:"pid"`
		Sessions []struct {
			ID      string `json:"id"`
			PeerPID int    `json:"peer_pid"`
		} `json:"sessions"`
		Container struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"container"`
	} `json:"status"`
}

func status(t *testing.T, e *Env) lcStatus {
	t.Helper()
	var st lcStatus
	if err := json.Unmarshal([]byte(e.MustRun("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func sessions(t *testing.T, e *Env) int {
	st := status(t, e)
	if st.Status == nil {
		return -1
	}
	return len(st.Status.Sessions)
}

// TestLifecycleKilledCLI: a CLI killed with SIGKILL does not keep a
// reference; teardown happens when the other session ends.
func TestLifecycleKilledCLI(t *testing.T) {
	e, d := lcEnv(t)
	a, _ := background(t, e, nil, "exec", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "first session", func() bool { return sessions(t, e) == 1 })
	pr, pw := io.Pipe()
	b, _ := background(t, e, pr, "exec", "--", "sh", "-c", "read line; echo got $line")
	Eventually(t, 30*time.Second, "second session", func() bool { return sessions(t, e) == 2 })
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 10*time.Second, "killed session detached", func() bool { return sessions(t, e) == 1 })
	fmt.Fprintln(pw, "bye")
	pw.Close()
	if err := b.Wait(); err != nil {
		t.Fatalf("second session: %v", err)
	}
	requireGone(t, d, 20*time.Second)
}

// TestLifecycleKilledCoordinator: after SIGKILL of the coordinator, the
// attached session ends with a clear error and the next start recovers
// (dead socket, leftover container).
func TestLifecycleKilledCoordinator(t *testing.T) {
	e, d := lcEnv(t)
	a, aerr := background(t, e, nil, "exec", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "session", func() bool { return sessions(t, e) == 1 })
	pid := status(t, e).Status.PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	werr := a.Wait()
	if ee, ok := werr.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("session survived its coordinator: %v", werr)
	}
	if !strings.Contains(aerr.String(), "coordinator exited unexpectedly") {
		t.Errorf("stderr: %s", aerr)
	}
	if !exists(d.Resources["control_socket"]) || len(containersOf(t, d.Hash)) == 0 {
		t.Fatalf("the kill left no dead socket or container to recover from; the test proves nothing")
	}
	if out := e.MustRun("exec", "--", "echo", "recovered"); out != "recovered\n" {
		t.Fatalf("after recovery: %q", out)
	}
	requireGone(t, d, 20*time.Second)
	requireNoRuntimeLeftovers(t, d)
}

// TestLifecycleStopAllAfterCrash: `lazaret stop --all` (what the test
// harness runs in cleanup) removes what a coordinator killed with SIGKILL
// left: its containers (sidecar included) and its dead socket.
func TestLifecycleStopAllAfterCrash(t *testing.T) {
	e, d := lcEnv(t)
	a, _ := background(t, e, nil, "exec", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "session", func() bool { return sessions(t, e) == 1 })
	// Positive control for requireNoRuntimeLeftovers: the uplink is seen
	// while the sandbox runs.
	if !uplinkRunning(d.Resources["netns"]) {
		t.Fatalf("no slirp4netns found for %s while the sandbox runs", d.Resources["netns"])
	}
	// And the host's CA bundle's snapshot exists while it runs (when the
	// host has the default bundle, which the profile then passes in).
	if _, err := os.Stat(config.DefaultCABundle); err == nil && !exists(d.Resources["ca_bundle_snapshot"]) {
		t.Fatalf("no CA bundle snapshot %s while the sandbox runs", d.Resources["ca_bundle_snapshot"])
	}
	if err := syscall.Kill(status(t, e).Status.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	if !exists(d.Resources["control_socket"]) || len(containersOf(t, d.Hash)) == 0 {
		t.Fatal("the kill left nothing behind; the test proves nothing")
	}
	if r := e.Run("stop", "--all"); r.Code != 0 || !strings.Contains(r.Stdout, "leftover") {
		t.Fatalf("stop --all: %+v", r)
	}
	requireGone(t, d, 20*time.Second)
	requireNoRuntimeLeftovers(t, d)
}

// TestLifecycleContainerDies: when the agent container ends behind
// lazaret's back (here: killed with podman), the attached session is told
// and everything is torn down; the next start gets a fresh sandbox.
func TestLifecycleContainerDies(t *testing.T) {
	e, d := lcEnv(t)
	a, aerr := background(t, e, nil, "exec", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "session", func() bool { return sessions(t, e) == 1 })
	if _, err := Podman(t, "kill", d.Resources["container"]); err != nil {
		t.Fatal(err)
	}
	werr := a.Wait()
	if ee, ok := werr.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("session survived its container: %v", werr)
	}
	if ee, ok := werr.(*exec.ExitError); ok {
		t.Logf("session exit code %d", ee.ExitCode())
	}
	// Usually the coordinator's report arrives in time to be shown; on a
	// loaded machine the command's 137 may come alone, which is fine.
	t.Logf("stderr: %s", aerr)
	requireGone(t, d, 10*time.Second)
	if out := e.MustRun("exec", "--", "echo", "fresh"); out != "fresh\n" {
		t.Fatalf("next start: %q", out)
	}
	requireGone(t, d, 20*time.Second)
}

// TestLifecycleStopWithSessions: `lazaret stop` ends attached sessions
// with a clear message and removes everything.
func TestLifecycleStopWithSessions(t *testing.T) {
	e, d := lcEnv(t)
	a, aerr := background(t, e, nil, "exec", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "session", func() bool { return sessions(t, e) == 1 })
	// ps lists the running domain; status shows the session's command.
	if out := e.MustRun("ps"); !strings.Contains(out, d.Hash) || !strings.Contains(out, d.Resources["container"]) {
		t.Errorf("ps does not list the domain:\n%s", out)
	}
	if out := e.MustRun("status"); !strings.Contains(out, "sleep 600") || !strings.Contains(out, "running") {
		t.Errorf("status:\n%s", out)
	}
	if out := e.MustRun("stop"); !strings.Contains(out, "stopped") {
		t.Fatalf("stop: %q", out)
	}
	werr := a.Wait()
	if ee, ok := werr.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("session survived stop: %v", werr)
	}
	if !strings.Contains(aerr.String(), "stopped by `lazaret stop`") {
		t.Errorf("stderr: %s", aerr)
	}
	requireGone(t, d, 20*time.Second)
	if st := status(t, e); st.Running {
		t.Fatal("status still running")
	}
}

// ptyReader accumulates what lazaret writes to its terminal.
type ptyReader struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (p *ptyReader) run(f *os.File) {
	r := bufio.NewReader(f)
	b := make([]byte, 4096)
	for {
		n, err := r.Read(b)
		p.mu.Lock()
		p.buf.Write(b[:n])
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (p *ptyReader) waitFor(t *testing.T, re *regexp.Regexp) {
	t.Helper()
	Eventually(t, time.Minute, "terminal output "+re.String(), func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return re.Match(p.buf.Bytes())
	})
}

func (p *ptyReader) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// TestLifecycleShellPTY drives `lazaret shell` through a terminal: a
// command's output, window resizes seen by `stty size`, Ctrl-C reaching
// the sandboxed process (not lazaret), and the shell's exit code.
func TestLifecycleShellPTY(t *testing.T) {
	e, d := lcEnv(t)
	cmd := e.Cmd(context.Background(), "shell")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	out := &ptyReader{}
	go out.run(ptmx)
	send := func(s string) {
		if _, err := ptmx.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	send("echo mark-$((6*7))\n")
	out.waitFor(t, regexp.MustCompile(`mark-42`))
	// The shell keeps the container's PATH (a login shell's /etc/profile
	// would reset it), so the agent finds the Escalation Client.
	send("command -v lazaret-escalate\n")
	out.waitFor(t, regexp.MustCompile(`/run/lazaret/bin/lazaret-escalate\r\n`))
	send("stty size\n")
	out.waitFor(t, regexp.MustCompile(`\b24 80\r\n`))
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 41, Cols: 113}); err != nil {
		t.Fatal(err)
	}
	// lazaret gets SIGWINCH from the kernel and resizes the inner PTY.
	Eventually(t, 30*time.Second, "resize seen", func() bool {
		send("stty size\n")
		time.Sleep(200 * time.Millisecond)
		return regexp.MustCompile(`\b41 113\r\n`).MatchString(out.text())
	})
	send("test -t 0 && echo is-a-tty\n")
	out.waitFor(t, regexp.MustCompile(`\bis-a-tty\r\n`))
	// Ctrl-C interrupts the sandboxed sleep; the shell and lazaret live on.
	// (bash abandons the rest of a line interrupted by Ctrl-C, so the
	// status is asked for on the next line.)
	send("sleep 300\n")
	time.Sleep(time.Second)
	send("\x03")
	send("echo sleep-status-$?\n")
	out.waitFor(t, regexp.MustCompile(`sleep-status-130`))
	send("exit 5\n")
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 5 {
		t.Fatalf("shell exit: %v\n%s", err, out.text())
	}
	requireGone(t, d, 20*time.Second)
}

// TestLifecycleExecSignals: without a TTY, podman exec does not proxy
// signals; lazaret delivers them inside the sandbox. SIGINT sent to
// lazaret reaches the command (its trap runs and its exit code comes
// back), and so does a Ctrl-C typed on a terminal that is stdin without
// -t, after a line typed there reached the command.
func TestLifecycleExecSignals(t *testing.T) {
	e, d := lcEnv(t)
	script := `trap 'echo got-int; exit 42' INT; read line; echo "got $line"; sleep 300 & wait`
	cmd := e.Cmd(context.Background(), "exec", "--", "sh", "-c", script)
	var out bytes.Buffer
	cmd.Stdin = strings.NewReader("piped\n")
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	Eventually(t, 2*time.Minute, "command running", func() bool { return strings.Contains(out.String(), "got piped") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 42 || !strings.Contains(out.String(), "got-int") {
		t.Fatalf("after SIGINT: %v, output %q", err, out.String())
	}

	// The same from a terminal that is not given to the command as a TTY.
	tcmd := e.Cmd(context.Background(), "exec", "--", "sh", "-c", script)
	ptmx, err := pty.Start(tcmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	t.Cleanup(func() { _ = tcmd.Process.Kill() })
	tout := &ptyReader{}
	go tout.run(ptmx)
	// Typed input reaches the command (lazaret relays it: podman runs
	// outside the terminal's foreground group).
	Eventually(t, time.Minute, "typed line relayed", func() bool {
		if strings.Contains(tout.text(), "got typed") {
			return true
		}
		if sessions(t, e) == 1 && !strings.Contains(tout.text(), "typed") {
			_, _ = ptmx.Write([]byte("typed\n"))
		}
		return false
	})
	if _, err := ptmx.Write([]byte{0x03}); err != nil {
		t.Fatal(err)
	}
	err = tcmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 42 {
		t.Fatalf("after Ctrl-C: %v, terminal %q", err, tout.text())
	}
	tout.waitFor(t, regexp.MustCompile(`got-int`))
	requireGone(t, d, 20*time.Second)
}

// lowFDs reads a recorded descriptor list and returns the descriptors
// below 10 (the shell keeps its script on one of its own above).
func lowFDs(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n < 10 {
			fds = append(fds, f)
		}
	}
	return strings.Join(fds, " ")
}

// TestLifecycleNoDescriptorLeaks: every podman that lazaret runs (from the
// coordinator: podman run, rm; from the CLI: podman exec) starts with only
// stdin, stdout and stderr, so neither the hold-to-bind lock nor a control
// connection can outlive its owner in a child. A podman wrapper first on
// PATH records its inherited descriptors and execs the real podman. The
// positive control runs the same recording with a leaked descriptor.
func TestLifecycleNoDescriptorLeaks(t *testing.T) {
	realPodman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatal(err)
	}
	e, d := lcEnv(t)
	wrapDir := filepath.Join(e.Root, "wrap")
	recDir := filepath.Join(e.Root, "fds")
	for _, dir := range []string{wrapDir, recDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The shell reads the script on a descriptor of its own (>= 10), so
	// only 0-9 are recorded: anything there besides 0-2 was inherited.
	script := fmt.Sprintf("#!/bin/sh\nls /proc/$$/fd > %s/$$\necho \"$@\" > %s/$$.args\nexec %s \"$@\"\n", recDir, recDir, realPodman)
	if err := os.WriteFile(filepath.Join(wrapDir, "podman"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e.ExtraEnv = append(e.ExtraEnv, "PATH="+wrapDir+":"+os.Getenv("PATH"))

	// Positive control: the wrapper run with an extra descriptor shows it.
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	ctl := exec.Command(filepath.Join(wrapDir, "podman"), "--version")
	ctl.ExtraFiles = []*os.File{f}
	if out, err := ctl.CombinedOutput(); err != nil {
		t.Fatalf("control: %v %s", err, out)
	}
	f.Close()
	rec := lowFDs(t, filepath.Join(recDir, strconv.Itoa(ctl.Process.Pid)))
	if rec != "0 1 2 3" {
		t.Fatalf("positive control: recorded %q, want the leaked fd 3 seen", rec)
	}
	os.Remove(filepath.Join(recDir, strconv.Itoa(ctl.Process.Pid)))
	os.Remove(filepath.Join(recDir, strconv.Itoa(ctl.Process.Pid)+".args"))

	cli, _ := background(t, e, nil, "exec", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "session", func() bool { return sessions(t, e) == 1 })
	// The coordinator is not dumpable: its descriptors are hidden from
	// the user's other processes (a CLI's are not: the control).
	if _, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cli.Process.Pid)); err != nil {
		t.Fatalf("control: cannot read the CLI's fds: %v", err)
	}
	if _, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", status(t, e).Status.PID)); err == nil {
		t.Error("the coordinator's descriptors are readable: PR_SET_DUMPABLE=0 not in effect")
	}
	if out := e.Run("stop"); out.Code != 0 {
		t.Fatalf("stop: %+v", out)
	}
	cli.Wait()
	requireGone(t, d, 20*time.Second)
	recs, err := os.ReadDir(recDir)
	if err != nil {
		t.Fatal(err)
	}
	// podman run and rm from the coordinator, podman exec from the CLI.
	if len(recs) < 6 {
		t.Fatalf("only %d podman runs recorded", len(recs)/2)
	}
	for _, r := range recs {
		if strings.HasSuffix(r.Name(), ".args") {
			continue
		}
		args, _ := os.ReadFile(filepath.Join(recDir, r.Name()+".args"))
		want := wantPodmanFDs(string(args))
		if got := lowFDs(t, filepath.Join(recDir, r.Name())); got != want {
			t.Errorf("podman %s (pid %s) started with descriptors %q, want %q", strings.TrimSpace(string(args)), r.Name(), got, want)
		}
	}
}

// wantPodmanFDs is the descriptors a podman started with args may hold:
// 0-2, then the ones it passes on on purpose (--preserve-fds N: the network
// sidecar's control socket, a session holder's delegation socket), then
// the container's environment on a pipe podman reads at start
// (--env-file /dev/fd/M, podman.Invocation: never on the argv), which
// must come right after them.
func wantPodmanFDs(args string) string {
	fds := []string{"0", "1", "2"}
	next := 3
	if m := regexp.MustCompile(`--preserve-fds (\d+) `).FindStringSubmatch(args + " "); m != nil {
		n, _ := strconv.Atoi(m[1])
		for range n {
			fds = append(fds, strconv.Itoa(next))
			next++
		}
	}
	if strings.Contains(args, " --env-file /dev/fd/") {
		if !strings.Contains(args, fmt.Sprintf(" --env-file /dev/fd/%d ", next)) {
			return "env-file on an unexpected descriptor"
		}
		fds = append(fds, strconv.Itoa(next))
	}
	return strings.Join(fds, " ")
}

// TestLifecycleSandboxFDs: the sandboxed command and the container's init
// see only stdin, stdout and stderr (plus the directory ls reads). The
// session's PID 1 is its holder's X (its own PID namespace), whose wake
// pipe and socket are close-on-exec; the container's init is looked at
// from the sandbox's first namespace, while the session holds it.
func TestLifecycleSandboxFDs(t *testing.T) {
	e, d := lcEnv(t)
	out := e.MustRun("exec", "--", "sh", "-c", "ls /proc/self/fd | tr '\\n' ' '; echo")
	// ls has its own directory descriptor open (3).
	if strings.TrimSpace(out) != "0 1 2 3" {
		t.Errorf("exec'd command descriptors: %q", out)
	}
	hold := e.Cmd(context.Background(), "exec", "--", "sleep", "600")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Process.Kill(); _ = hold.Wait() }()
	var init string
	Eventually(t, time.Minute, "the container's init", func() bool {
		o, err := Podman(t, "exec", d.Resources["container"], "ls", "/proc/1/fd")
		init = strings.Join(strings.Fields(o), " ")
		return err == nil
	})
	if init != "0 1 2" {
		t.Errorf("container init descriptors: %q", init)
	}
	_ = hold.Process.Kill()
	_ = hold.Wait()
	requireGone(t, d, 30*time.Second)
}

// TestLifecycleBadInput: an unknown profile and a missing image give a
// one-line error with a hint and leave nothing running.
func TestLifecycleBadInput(t *testing.T) {
	e, d := lcEnv(t)
	r := e.Run("exec", "nosuch", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "unknown profile") || strings.Count(strings.TrimSpace(r.Stderr), "\n") > 1 {
		t.Fatalf("unknown profile: %+v", r)
	}
	if exists(d.Resources["control_socket"]) {
		t.Fatal("a coordinator started for a bad profile")
	}

	e.WriteConfig("[profiles.ghost]\nimage = \"localhost/lazaret-lifecycle-missing:1\"\ngit_mode = \"direct\"\n")
	g := domainOf(t, e, "ghost")
	g.Resources["workspace"] = canonical(t, e.Workspace)
	r = e.Run("exec", "ghost", "--", "true")
	// A localhost/ image is built on this machine: the error names the
	// profile, the config line of its image and the command that builds it.
	if r.Code != 3 || !strings.Contains(r.Stderr, "podman build -t localhost/lazaret-lifecycle-missing:1") || !strings.Contains(r.Stderr, "config.toml:3") {
		t.Fatalf("missing image: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	if len(lines) > 2 || !strings.HasPrefix(lines[0], "lazaret: profile ghost: ") || (len(lines) == 2 && !strings.HasPrefix(lines[1], "hint: ")) {
		t.Fatalf("want one error line (and at most a hint), got %q", r.Stderr)
	}
	requireGone(t, g, 5*time.Second)

	// podman missing: the coordinator cannot run it; the user is sent to
	// lazaret doctor and nothing stays behind.
	e.WriteConfig("")
	saved := e.ExtraEnv
	e.ExtraEnv = append(e.ExtraEnv, "PATH=/nonexistent")
	r = e.Run("exec", "--", "true")
	e.ExtraEnv = saved
	if r.Code != 3 || !strings.Contains(r.Stderr, "lazaret doctor") {
		t.Fatalf("podman missing: %+v", r)
	}
	requireGone(t, d, 20*time.Second)
}
