//go:build integration

package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/fdsafe/fdprobe"
)

// TestSecProcessProbe is not a test: TestSecProcessDescriptors runs this
// binary with it as an approved host command (and as its positive
// control) to report what the command inherited.
func TestSecProcessProbe(t *testing.T) {
	if args := flag.Args(); len(args) == 0 || args[0] != fdprobe.Arg {
		t.Skip("helper of TestSecProcessDescriptors")
	}
	r, err := fdprobe.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if err := fdprobe.Write(os.Stdout, r); err != nil {
		t.Fatal(err)
	}
}

// secProbeArgv is the probe's exact argv (auto-approved as is).
func secProbeArgv(t *testing.T) []string {
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	return []string{self, "-test.run=TestSecProcessProbe", fdprobe.Arg}
}

// childrenOf returns the pids whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		c, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// secOldWayControl: the probe started the old way — inheriting the
// leaks, in the terminal's session — holds all three leaks, injects into
// the terminal (its echo is read back from the pty master) and sees the
// environment's secrets.
func secOldWayControl(t *testing.T, l *fdprobe.Leaks, env []string) {
	t.Helper()
	argv := secProbeArgv(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = l.Files()
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("positive control probe: %v: %s", err, out)
	}
	r, err := fdprobe.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if found := l.FoundIn(r); len(found) != 3 {
		t.Fatalf("positive control: the old way passes %v, want the pty, the file and the pipe", found)
	}
	echo, err := l.EchoBefore("<control-end>")
	if !r.Injected() || err != nil || echo == "" {
		t.Fatalf("positive control: TIOCSTI did not reach the terminal (injected %v, echo %q, %v)", r.Injected(), echo, err)
	}
	if !strings.Contains(strings.Join(r.Env, "\n"), "sk-ant-canary") {
		t.Fatal("positive control: the old way does not see the API key")
	}
}

// TestSecProcessDescriptors: a CLI started with a terminal, a file and a
// pipe inherited without close-on-exec (as terminal emulators and IDEs
// leave them) starts a coordinator whose children hold none of them, and
// an approved host command gets exactly stdin /dev/null and two pipes, no
// terminal, no /dev/tty, no TIOCSTI, and only PATH, HOME, LANG, TERM=dumb.
func TestSecProcessDescriptors(t *testing.T) {
	e := NewEnv(t)
	probe := strings.Join(secProbeArgv(t), " ")
	e.WriteConfig(fmt.Sprintf("[escalation]\nauto_approve = [%q, %q]\n", "ls -l /proc/self/fd", probe))
	e.ExtraEnv = append(e.ExtraEnv, "LAZARET_SEC_CANARY=canary-value", "ANTHROPIC_API_KEY=sk-ant-canary")
	l, err := fdprobe.OpenLeaks(e.Root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	secOldWayControl(t, l, append(os.Environ(), e.ExtraEnv...))

	// The leader CLI, holding the leaks, spawns the coordinator and keeps
	// a session open.
	hold, holdW := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	holder := e.Cmd(ctx, "exec", "--", "cat")
	holder.ExtraFiles, holder.Stdin = l.Files(), hold
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holdW.Close(); _ = holder.Wait() }()
	Eventually(t, 2*time.Minute, "the holder's session", func() bool { return sessions(t, e) == 1 })
	pids := coordinatorPIDs(canonical(t, e.Workspace))
	if len(pids) != 1 {
		t.Fatalf("coordinators %v", pids)
	}
	secCheckCoordinator(t, l, pids[0])
	// The CLI's own children (runsc exec, or podman exec) get its stdio only.
	if secCheckChildren(t, l, holder.Process.Pid, "CLI") == 0 {
		t.Fatal("no readable child of the CLI to inspect")
	}

	r := e.Run("exec", "--", "sh", "-c", "lazaret-escalate -- ls -l /proc/self/fd && lazaret-escalate -- "+probe)
	if r.Code != 0 {
		t.Fatalf("escalations: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	secCheckLs(t, r.Stdout)
	rep, err := fdprobe.Parse([]byte(r.Stdout))
	if err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	secCheckProbe(t, l, rep)
}

// secCheckCoordinator: the coordinator's children hold none of the leaks,
// nor does the coordinator when its descriptors can be read (it is not
// dumpable, so usually they cannot).
func secCheckCoordinator(t *testing.T, l *fdprobe.Leaks, pid int) {
	t.Helper()
	if fds, err := fdprobe.Targets(pid); err == nil {
		if found := l.Found(fds); len(found) != 0 {
			t.Fatalf("the coordinator holds %v", found)
		}
		t.Logf("coordinator %d descriptors: %v", pid, fds)
	} else {
		t.Logf("coordinator %d descriptors not readable (non-dumpable): %v", pid, err)
	}
	if secCheckChildren(t, l, pid, "coordinator") == 0 {
		t.Fatalf("no readable child of coordinator %d to inspect", pid)
	}
}

// secCheckChildren fails if a child of pid holds a leak; it returns how
// many children it could inspect.
func secCheckChildren(t *testing.T, l *fdprobe.Leaks, pid int, who string) int {
	t.Helper()
	seen := 0
	for _, c := range childrenOf(pid) {
		fds, err := fdprobe.Targets(c)
		if err != nil {
			continue
		}
		seen++
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c))
		name := strings.TrimSpace(string(comm))
		t.Logf("%s child %d (%s): %v", who, c, name, fds)
		if found := l.Found(fds); len(found) != 0 {
			t.Fatalf("%s child %d (%s) holds %v", who, c, name, found)
		}
	}
	return seen
}

// secCheckLs: `ls -l /proc/self/fd` run on the host lists 0 = /dev/null,
// 1 and 2 pipes, and its own listing descriptor, nothing else.
func secCheckLs(t *testing.T, out string) {
	t.Helper()
	fds := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, " -> "); i >= 0 {
			f := strings.Fields(line[:i])
			fds[f[len(f)-1]] = line[i+4:]
		}
	}
	if len(fds) != 4 || fds["0"] != "/dev/null" || !strings.HasPrefix(fds["1"], "pipe:") || !strings.HasPrefix(fds["2"], "pipe:") || !strings.HasSuffix(fds["3"], "/fd") {
		t.Fatalf("ls -l /proc/self/fd on the host saw %v, want 0=/dev/null 1,2=pipes 3=its listing\n%s", fds, out)
	}
}

func secCheckProbe(t *testing.T, l *fdprobe.Leaks, r fdprobe.Report) {
	t.Helper()
	fds := r.Targets()
	if len(fds) != 3 || fds[0] != os.DevNull || !strings.HasPrefix(fds[1], "pipe:") || !strings.HasPrefix(fds[2], "pipe:") {
		t.Fatalf("approved command inherited %v (leaks: %v), want exactly 0=/dev/null 1,2=pipes", fds, l.FoundIn(r))
	}
	for _, f := range r.FDs {
		if f.TTY {
			t.Fatalf("approved command holds a terminal: %+v", f)
		}
	}
	if r.DevTTY == "" || r.SID != r.PID || r.Injected() {
		t.Fatalf("approved command: /dev/tty error %q, sid %d pid %d, injected %v", r.DevTTY, r.SID, r.PID, r.Injected())
	}
	if echo, err := l.EchoBefore("<end>"); err != nil || echo != "" {
		t.Fatalf("the terminal received %q (%v)", echo, err)
	}
	var names []string
	for _, kv := range r.Env {
		names = append(names, strings.SplitN(kv, "=", 2)[0])
	}
	if strings.Join(names, " ") != "PATH HOME LANG TERM" || r.Env[3] != "TERM=dumb" {
		t.Fatalf("approved command environment %q, want exactly PATH, HOME, LANG, TERM=dumb", r.Env)
	}
}

// TestSecProcessRepairsDomainModes: a domain whose gitsentry/ directory
// was left 0600 (by a coordinator that changed its umask while the Git
// Sentry made it) starts again, and the directory is 0700 afterwards.
// Positive control: in the damaged directory the user cannot create the
// file the Git Sentry writes at start.
func TestSecProcessRepairsDomainModes(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	e.MustRun("exec", "--", "true")
	d := domainOf(t, e, "default")
	gsDir := filepath.Join(d.Resources["domain_root"], "gitsentry")
	Eventually(t, time.Minute, "the coordinator to leave", func() bool {
		return len(coordinatorPIDs(canonical(t, e.Workspace))) == 0
	})
	if err := os.Chmod(gsDir, 0o600); err != nil {
		t.Fatal(err)
	}
	err := os.WriteFile(filepath.Join(gsDir, "system.gitconfig.tmp"), nil, 0o444)
	if !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("positive control: writing into the 0600 gitsentry/ gave %v, want permission denied", err)
	}
	e.MustRun("exec", "--", "true")
	fi, err := os.Lstat(gsDir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("gitsentry/ after the start: mode %v, want 0700", fi.Mode().Perm())
	}
}
