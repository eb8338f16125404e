//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// execProbe prints what a session's command gets: identity, groups,
// capabilities, no_new_privs, working directory, environment (without
// the per-session values), descriptors and their kinds, limits, umask and
// its standard input.
const execProbe = `id; pwd; grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status; ` +
	`env | grep -v '^LAZARET_SESSION_' | sort; ls /proc/self/fd | tr '\n' ' '; echo; ` +
	`for f in 0 1 2 3; do readlink /proc/self/fd/$f | cut -d'[' -f1; done; ulimit -n; ulimit -u; umask; ` +
	`read line; echo "stdin=$line"`

// viaPodmanEnv makes a lazaret run use podman exec for its command.
const viaPodmanEnv = "LAZARET_EXEC_PATH=podman"

// runVia runs lazaret -v with args, through podman exec when podman is
// set, and checks from its debug log which path ran the command.
func runVia(t *testing.T, e *Env, podman bool, stdin string, args ...string) Result {
	t.Helper()
	saved := e.ExtraEnv
	defer func() { e.ExtraEnv = saved }()
	if podman {
		e.ExtraEnv = append(append([]string(nil), saved...), viaPodmanEnv)
	}
	r := e.RunStdin(stdin, append([]string{"-v"}, args...)...)
	direct := strings.Contains(r.Stderr, `msg="runsc exec"`)
	if direct == podman {
		t.Fatalf("lazaret %v (podman exec: %v) ran the command the other way; stderr:\n%s", args, podman, r.Stderr)
	}
	return r
}

// TestRunscExecMatchesPodmanExec: a session's command run with runsc exec
// directly (the default) gets exactly what podman exec gives it: user,
// groups, capabilities, no_new_privs, seccomp, working directory,
// environment, descriptors (the holder's delegation socket on 3),
// limits, umask, stdin, and the same exit codes. Control: a podman exec
// with another working directory and one more variable differs in the
// same comparison.
func TestRunscExecMatchesPodmanExec(t *testing.T) {
	e, _ := lcEnv(t)
	background(t, e, nil, "exec", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "the holding session", func() bool { return sessions(t, e) == 1 })

	direct := runVia(t, e, false, "in-line\n", "exec", "--", "sh", "-c", execProbe)
	viaPodman := runVia(t, e, true, "in-line\n", "exec", "--", "sh", "-c", execProbe)
	if direct.Code != 0 || viaPodman.Code != 0 {
		t.Fatalf("probe: direct %d, podman %d\n%s\n%s", direct.Code, viaPodman.Code, direct.Stderr, viaPodman.Stderr)
	}
	if direct.Stdout != viaPodman.Stdout {
		t.Errorf("runsc exec and podman exec differ:\n--- runsc exec\n%s\n--- podman exec\n%s", direct.Stdout, viaPodman.Stdout)
	}
	for _, want := range []string{"uid=0(root)", "/workspace\n", "CapEff:\t00000000000000fb", "NoNewPrivs:\t1", "0 1 2 3 ", "stdin=in-line"} {
		if !strings.Contains(direct.Stdout, want) {
			t.Errorf("runsc exec: %q missing in\n%s", want, direct.Stdout)
		}
	}
	t.Logf("both paths:\n%s", direct.Stdout)

	// Control: the comparison sees a difference in cwd and environment.
	ctr := strings.TrimSpace(mustPodman(t, "ps", "--filter", "label=lazaret.data_root="+e.DataRoot, "--format", "{{.Names}}"))
	other, err := Podman(t, "exec", "-i", "--workdir", "/tmp", "--env", "LZ_CONTROL=1", ctr, "sh", "-c", "echo in-line | (sh -c \"$0\")", execProbe)
	if err != nil {
		t.Fatalf("control: %v\n%s", err, other)
	}
	if other == direct.Stdout || !strings.Contains(other, "LZ_CONTROL=1") {
		t.Errorf("control: a podman exec with another cwd and environment compared equal:\n%s", other)
	}

	for _, tc := range []struct {
		cmd  string
		want int
	}{
		{"exit 3", 3},
		{"kill -9 $$", 137},
		{"exec /nonexistent", 127},
		{"exec /etc/passwd", 126},
	} {
		d := runVia(t, e, false, "", "exec", "--", "sh", "-c", tc.cmd)
		p := runVia(t, e, true, "", "exec", "--", "sh", "-c", tc.cmd)
		if d.Code != tc.want || p.Code != tc.want {
			t.Errorf("%q: runsc exec %d, podman exec %d, want %d", tc.cmd, d.Code, p.Code, tc.want)
		}
	}
	for _, cmd := range []string{"/nonexistent", "/etc/passwd"} {
		d := runVia(t, e, false, "", "exec", "--", cmd)
		p := runVia(t, e, true, "", "exec", "--", cmd)
		if d.Code != p.Code || d.Code < 126 {
			t.Errorf("%s: runsc exec %d, podman exec %d", cmd, d.Code, p.Code)
		}
	}
}

// TestRunscExecDescriptors: the runsc exec the CLI starts holds only
// /dev/null on 0 and 1, its own stderr pipe on 2, the holder's
// delegation socket on 3, the process spec's pipe on 4 and the command's
// three stream pipes on 5-7: none of the CLI's own descriptors. A runsc
// wrapper (LAZARET_RUNSC) records them; the control records a leaked
// descriptor.
func TestRunscExecDescriptors(t *testing.T) {
	real := filepath.Join(os.Getenv("LAZARET_BIN"), "..", "lib", "lazaret", "runsc")
	if _, err := os.Stat(real); err != nil {
		real = "/usr/local/lib/lazaret/runsc"
	}
	e, _ := lcEnv(t)
	background(t, e, nil, "exec", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "the holding session", func() bool { return sessions(t, e) == 1 })
	rec := filepath.Join(e.Root, "rec")
	if err := os.MkdirAll(rec, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(e.Root, "runsc-wrap")
	// find writes the record itself (-fprintf), from a child, while the
	// wrapper shell waits holding exactly what it inherited: a shell
	// redirection or pipeline would open descriptors in the shell itself.
	script := fmt.Sprintf("#!/bin/sh\nfind /proc/$$/fd/ -mindepth 1 -fprintf %s/$$ '%%f=%%l\\n'\nexec %s \"$@\"\n", rec, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(wrapper, "--version")
	cmd.ExtraFiles = []*os.File{f}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("control: %v %s", err, out)
	}
	if got := readRec(t, rec, cmd.Process.Pid); !strings.Contains(got, "3=/dev/null") {
		t.Fatalf("control: the wrapper did not see the leaked descriptor: %q", got)
	}

	e.ExtraEnv = append(e.ExtraEnv, "LAZARET_RUNSC="+wrapper)
	before, _ := os.ReadDir(rec)
	r := runVia(t, e, false, "", "exec", "--", "true")
	if r.Code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	after, _ := os.ReadDir(rec)
	if len(after) != len(before)+1 {
		t.Fatalf("%d runsc runs recorded, want 1", len(after)-len(before))
	}
	seen := map[string]bool{}
	for _, b := range before {
		seen[b.Name()] = true
	}
	for _, a := range after {
		if seen[a.Name()] {
			continue
		}
		pid, _ := strconv.Atoi(a.Name())
		got := readRec(t, rec, pid)
		want := "0=/dev/null\n1=/dev/null\n2=pipe:\n3=socket:\n4=pipe:\n5=pipe:\n6=pipe:\n7=pipe:\n"
		if got != want {
			t.Errorf("runsc exec started with\n%s\nwant\n%s", got, want)
		}
	}
}

// readRec is the wrapper's record as "N=TARGET" lines for descriptors
// below 10, sorted, the target cut before any "[".
func readRec(t *testing.T, dir string, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(pid)))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		fd, target, ok := strings.Cut(l, "=")
		if n, err := strconv.Atoi(fd); !ok || err != nil || n >= 10 {
			continue
		}
		target, _, _ = strings.Cut(target, "[")
		lines = append(lines, fd+"="+target+"\n")
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}
