package eschost

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/lazaret-dev/lazaret/internal/fdsafe/fdprobe"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

func runExec(t *testing.T, e *Executor, argv ...string) (string, string, Result) {
	t.Helper()
	exe, err := escprompt.Resolve(argv[0], "/", "/usr/bin:/bin")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var so, se bytes.Buffer
	res, err := e.Run(context.Background(), exe, append([]string{exe}, argv[1:]...), dir, &so, &se)
	if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), res
}

var fdArgs = []string{"readlink", "/proc/self/fd/0", "/proc/self/fd/1", "/proc/self/fd/2", "/proc/self/fd/3",
	"/proc/self/fd/4", "/proc/self/fd/5", "/proc/self/fd/6", "/proc/self/fd/7", "/proc/self/fd/8", "/proc/self/fd/9"}

// TestExecOnlyStdFds: the command sees fds 0-2 only, stdin /dev/null.
// Control: the same probe with a descriptor passed on shows it.
func TestExecOnlyStdFds(t *testing.T) {
	// A descriptor open in the coordinator must not reach the command.
	leak, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	out, _, _ := runExec(t, &Executor{Env: MinimalEnv("/usr/bin:/bin", "/", "")}, fdArgs...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "/dev/null" || !strings.HasPrefix(lines[1], "pipe:") {
		t.Fatalf("command saw descriptors %q, want exactly 0=/dev/null, 1, 2", lines)
	}
	cmd := exec.Command("/usr/bin/readlink", fdArgs[1:]...)
	cmd.ExtraFiles = []*os.File{leak}
	ctl, _ := cmd.Output()
	if n := len(strings.Split(strings.TrimSpace(string(ctl)), "\n")); n != 4 {
		t.Fatalf("positive control: probe saw %d descriptors, want 4", n)
	}
}

// ttyNr returns field 7 of /proc/<pid>/stat as printed by the probe.
func ttyNr(t *testing.T, stat string) string {
	t.Helper()
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:])
	if len(f) < 5 {
		t.Fatalf("bad stat %q", stat)
	}
	return f[4] // state ppid pgrp session tty_nr
}

// TestExecNoControllingTTY: even when the coordinator has a controlling
// terminal, the command gets none and is a session leader. Control: the
// same probe started on a terminal has a non-zero tty_nr.
func TestExecNoControllingTTY(t *testing.T) {
	out, _, _ := runExec(t, &Executor{Env: MinimalEnv("/usr/bin:/bin", "/", "")}, "cat", "/proc/self/stat")
	if got := ttyNr(t, out); got != "0" {
		t.Fatalf("tty_nr = %s, want 0", got)
	}
	f := strings.Fields(out[strings.LastIndexByte(out, ')')+1:])
	if f[2] != f[3] { // pgrp == session: a new session led by the command's group
		t.Fatalf("not in a new session: pgrp %s session %s", f[2], f[3])
	}
	cmd := exec.Command("/usr/bin/cat", "/proc/self/stat")
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(ptmx)
	_ = cmd.Wait()
	if got := ttyNr(t, buf.String()); got == "0" {
		t.Fatal("positive control: a command on a pty shows no tty")
	}
}

// TestExecMinimalEnv: nothing of the coordinator's environment beyond the
// fixed four variables reaches the command. Control: a plain exec does
// pass NODE_OPTIONS on.
func TestExecMinimalEnv(t *testing.T) {
	t.Setenv("NODE_OPTIONS", "--require=/tmp/evil.js")
	t.Setenv("LD_PRELOAD", "/tmp/evil.so")
	t.Setenv("GIT_SSH_COMMAND", "evil")
	out, _, _ := runExec(t, &Executor{Env: MinimalEnv("/usr/bin:.:/bin", "/home/u", "")}, "env")
	want := "PATH=/usr/bin:/bin\nHOME=/home/u\nLANG=C.UTF-8\nTERM=dumb\n"
	if out != want {
		t.Fatalf("env = %q, want %q", out, want)
	}
	ctl, _ := exec.Command("/usr/bin/env").Output()
	if !strings.Contains(string(ctl), "NODE_OPTIONS=") {
		t.Fatal("positive control: plain exec did not inherit NODE_OPTIONS")
	}
}

func TestExecExitCodeAndCap(t *testing.T) {
	e := &Executor{Env: MinimalEnv("/usr/bin:/bin", "/", ""), OutputCap: 1000}
	if _, _, res := runExec(t, e, "false"); res.ExitCode != 1 {
		t.Fatalf("false: exit %d", res.ExitCode)
	}
	out, _, res := runExec(t, e, "head", "-c", "100000", "/dev/zero")
	if len(out) != 1000 || !res.Truncated || res.ExitCode != 0 {
		t.Fatalf("cap: %d bytes, truncated %v, exit %d", len(out), res.Truncated, res.ExitCode)
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	e := &Executor{Env: MinimalEnv("/usr/bin:/bin", "/", ""), Timeout: 300 * time.Millisecond}
	_, _, res := runExec(t, e, "sleep", "60")
	if !res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("timeout: %+v", res)
	}
}

// probeInTerminal runs execHelper in mode as a process whose controlling
// terminal is the leaks' pty and which inherited the leaks (fd 3 = pty,
// 4 = file, 5 = pipe) without close-on-exec, with secrets in its
// environment, and returns the probe's report.
func probeInTerminal(t *testing.T, l *fdprobe.Leaks, mode string) fdprobe.Report {
	t.Helper()
	cmd := exec.Command(os.Args[0], execHelperArg, mode)
	cmd.ExtraFiles = l.Files()
	cmd.Env = append(os.Environ(), "LAZARET_SECRET=s3cret", "ANTHROPIC_API_KEY=sk-ant-test")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	r, err := fdprobe.Run(cmd)
	if err != nil {
		t.Fatalf("helper %s: %v", mode, err)
	}
	return r
}

// TestExecInheritsNothing: a command run by the executor of a coordinator
// that inherited a terminal, a file and a pipe — and even has that
// terminal as its controlling terminal — gets exactly stdin /dev/null and
// two pipes, no terminal, no /dev/tty, cannot inject keystrokes with
// TIOCSTI, and sees only the fixed environment.
// Positive control: a command started the plain way from the same process
// holds all three leaks and its TIOCSTI lands in the terminal (read back
// as echo from the pty master).
func TestExecInheritsNothing(t *testing.T) {
	l, err := fdprobe.OpenLeaks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	ctl := probeInTerminal(t, l, "plain")
	if found := l.FoundIn(ctl); len(found) != 3 {
		t.Fatalf("positive control: plain child holds %v, want the pty, the file and the pipe", found)
	}
	echo, err := l.EchoBefore("<end-1>")
	if !ctl.Injected() || err != nil || echo == "" {
		t.Fatalf("positive control: TIOCSTI from a plain child did not reach the terminal (report %+v, echo %q, %v)", ctl, echo, err)
	}

	r := probeInTerminal(t, l, "executor")
	fds := r.Targets()
	if len(fds) != 3 || fds[0] != os.DevNull || !strings.HasPrefix(fds[1], "pipe:") || !strings.HasPrefix(fds[2], "pipe:") {
		t.Fatalf("command inherited %v, want exactly 0=/dev/null 1,2=pipes", fds)
	}
	for _, f := range r.FDs {
		if f.TTY {
			t.Fatalf("command holds a terminal: %+v", f)
		}
	}
	if r.DevTTY == "" || r.SID != r.PID || r.Injected() {
		t.Fatalf("command: /dev/tty error %q, sid %d pid %d, injected %v: want no controlling terminal", r.DevTTY, r.SID, r.PID, r.Injected())
	}
	if echo, err := l.EchoBefore("<end-2>"); err != nil || echo != "" {
		t.Fatalf("terminal received %q (%v) while the command ran", echo, err)
	}
	want := MinimalEnv("/usr/bin:/bin", "/home/u", "")
	if !slices.Equal(r.Env, want) {
		t.Fatalf("command environment %q, want exactly %q", r.Env, want)
	}
	if !slices.ContainsFunc(ctl.Env, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") }) {
		t.Fatal("positive control: the plain child did not see the API key")
	}
}
