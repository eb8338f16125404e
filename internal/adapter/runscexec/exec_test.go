package runscexec

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/capped"
)

// fakeRunsc writes a stand-in for runsc: with one extra file (fd 3) the
// spec is on fd 4 and the command's 0, 1, 2 are fds 5, 6, 7. It records
// its argv, the spec and where its fd 6 points, copies fd 5 to fd 6,
// writes to fd 7 and fd 3, runs body and exits with code.
func fakeRunsc(t *testing.T, dir, body string, code int) string {
	t.Helper()
	script := "#!/bin/sh\n" +
		"printf '%s\\n' \"$@\" > " + dir + "/args\n" +
		"cat /dev/fd/4 > " + dir + "/spec\n" +
		"readlink /proc/self/fd/6 > " + dir + "/fd6\n" +
		"cat <&5 >&6\n" +
		"echo to-stderr >&7\n" +
		"echo to-three >&3\n" +
		body + "\n" +
		"exit " + strconv.Itoa(code) + "\n"
	p := filepath.Join(dir, "runsc")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

type run struct {
	root   string
	code   int
	msg    string
	stdout string
	stderr string
	three  string
}

// runFake runs o through the fake runsc the way attach does, with stdin
// "hello", and returns what came out.
func runFake(t *testing.T, dir, runsc string, tty bool) run {
	t.Helper()
	c := load(t)
	threeR, threeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer threeR.Close()
	e, err := c.Command(context.Background(), runsc, []string{"--global"}, Options{Command: []string{"cmd", "arg"}, Env: map[string]string{"SECRET": "v"}}, []*os.File{threeW})
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW, _ := os.Pipe()
	_, _ = stdinW.WriteString("hello\n")
	stdinW.Close()
	defer stdinR.Close()
	out, _ := os.Create(filepath.Join(dir, "out"))
	errOut, _ := os.Create(filepath.Join(dir, "err"))
	if fd, err := e.Wire(stdinR, out, errOut, tty); err != nil || fd != 5 {
		t.Fatalf("Wire = %d, %v; want 5", fd, err)
	}
	err = e.Cmd.Start()
	e.Started()
	threeW.Close()
	if err != nil {
		t.Fatal(err)
	}
	code := 0
	if err := e.Cmd.Wait(); err != nil {
		code = e.Cmd.ProcessState.ExitCode()
	}
	e.Done()
	out.Close()
	errOut.Close()
	r := run{root: c.Root}
	r.code, r.msg = e.Result(code)
	b, _ := os.ReadFile(filepath.Join(dir, "out"))
	r.stdout = string(b)
	b, _ = os.ReadFile(filepath.Join(dir, "err"))
	r.stderr = string(b)
	buf := make([]byte, 100)
	n, _ := threeR.Read(buf)
	r.three = string(buf[:n])
	return r
}

func TestCommandArgvAndSpec(t *testing.T) {
	dir := t.TempDir()
	r := runFake(t, dir, fakeRunsc(t, dir, "", 3), false)
	if r.code != 3 || r.msg != "" {
		t.Errorf("Result = %d, %q; want the command's 3", r.code, r.msg)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	want := []string{"--global", "--root", r.root, "exec", "--process", "/dev/fd/4",
		"--pass-fd=3:3", "--pass-fd=5:0", "--pass-fd=6:1", "--pass-fd=7:2", testID}
	if got := strings.Fields(string(args)); !slices.Equal(got, want) {
		t.Errorf("argv = %q\nwant   %q", got, want)
	}
	var p process
	spec, _ := os.ReadFile(filepath.Join(dir, "spec"))
	if err := json.Unmarshal(spec, &p); err != nil || !slices.Equal(p.Args, []string{"cmd", "arg"}) || !slices.Contains(p.Env, "SECRET=v") {
		t.Errorf("spec = %s (%v)", spec, err)
	}
	if strings.Contains(string(args), "SECRET") {
		t.Error("an environment value is in runsc's argv")
	}
	if r.stdout != "hello\n" || r.stderr != "to-stderr\n" || r.three != "to-three\n" {
		t.Errorf("streams: stdout %q stderr %q fd3 %q", r.stdout, r.stderr, r.three)
	}
}

// Without a TTY the command's streams are pipes, never the caller's own
// file; with a TTY (the session's PTY) they go as they are, which is the
// control that the check sees the caller's file.
func TestPlainStreamsArePipes(t *testing.T) {
	dir := t.TempDir()
	runFake(t, dir, fakeRunsc(t, dir, "", 0), false)
	fd6, _ := os.ReadFile(filepath.Join(dir, "fd6"))
	if !strings.HasPrefix(string(fd6), "pipe:") {
		t.Errorf("plain: the command's stdout is %q, want a pipe", fd6)
	}
	dir2 := t.TempDir()
	runFake(t, dir2, fakeRunsc(t, dir2, "", 0), true)
	fd6, _ = os.ReadFile(filepath.Join(dir2, "fd6"))
	if strings.TrimSpace(string(fd6)) != filepath.Join(dir2, "out") {
		t.Errorf("control (tty): the command's stdout is %q, want the file itself", fd6)
	}
}

// A background process still holding the output pipe does not keep the
// session: what the command wrote before it exited is copied, later
// output is not waited for (the test would block on the background
// sleep otherwise).
func TestDoneDoesNotWaitForBackgroundWriters(t *testing.T) {
	dir := t.TempDir()
	body := "echo early >&6; (sleep 30; echo late >&6) 2>/dev/null & echo $! > " + dir + "/bg"
	r := runFake(t, dir, fakeRunsc(t, dir, body, 0), false)
	if b, err := os.ReadFile(filepath.Join(dir, "bg")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if r.stdout != "hello\nearly\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
}

func TestResultMapsRunscFailures(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		code int
		want int
	}{
		{`executing processes for container: executing command "x" in sandbox: failed to load x: no such file or directory`, 128, 127},
		{`executing processes for container: executing command "x" in sandbox: error finding executable "x" in PATH [/bin]: no such file or directory`, 128, 127},
		{`executing processes for container: executing command "/etc/passwd" in sandbox: failed to load /etc/passwd: permission denied`, 128, 126},
		{`FetchSpec failed: loading container: file does not exist`, 128, 125},
		{`waiting on pid 7: connection reset`, 128, 125},
		{"", 128, 128},    // the command's own 128
		{"warning", 3, 3}, // the command's own code
	} {
		e := &Exec{stderr: &capped.Buffer{Max: 1 << 10}}
		_, _ = e.stderr.Write([]byte(tc.msg))
		if got, msg := e.Result(tc.code); got != tc.want || msg != tc.msg {
			t.Errorf("Result(%d) with %q = %d, %q; want %d", tc.code, tc.msg, got, msg, tc.want)
		}
	}
}

func TestRunscFailureIsReported(t *testing.T) {
	dir := t.TempDir()
	body := `echo 'executing processes for container: executing command "cmd" in sandbox: failed to load cmd: no such file or directory' >&2`
	r := runFake(t, dir, fakeRunsc(t, dir, body, 128), false)
	if r.code != 127 || !strings.Contains(r.msg, "failed to load cmd") {
		t.Errorf("Result = %d, %q; want 127 and runsc's message", r.code, r.msg)
	}
}
