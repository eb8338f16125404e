package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/insandbox/escclient"
)

// signerScript stands in for lazaret-escalate-go: as the signer it runs
// this test binary in signer mode (TestHolderSignerChild); as the front
// end's fallback it records that it ran.
func signerScript(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "go-client")
	script := "#!/bin/sh\nif [ \"$1\" = " + escclient.SignerVerb + " ]; then LZ_SIGNER_CHILD=1 exec " + os.Args[0] + " -test.run='^TestHolderSignerChild$' -- \"$@\"; fi\necho fallback-ran >&2\nexit 99\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHolderSignerChild is the signer started by the holder in
// TestHolder.
func TestHolderSignerChild(t *testing.T) {
	if os.Getenv("LZ_SIGNER_CHILD") != "1" {
		t.Skip("helper")
	}
	os.Exit(escclient.SignerMain(flag.Args()[1:], os.Stderr))
}

// keySocket returns one end of a socket pair holding key, as the CLI
// passes the delegation (session.Delegated.Channel).
func keySocket(t *testing.T, key []byte) *os.File {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := os.NewFile(uintptr(fds[1]), "w")
	_, _ = w.Write(key)
	w.Close()
	return os.NewFile(uintptr(fds[0]), "key")
}

// runHolder runs the C holder with script as its command; with key, the
// delegation arrives on descriptor 3 as the CLI sends it.
func runHolder(t *testing.T, fe, goClient string, key []byte, script string) (string, int) {
	t.Helper()
	cmd := exec.Command(fe, "__session", "--", "sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LAZARET_ESCALATE_FALLBACK=" + goClient, "FE=" + fe, "TMPDIR=" + t.TempDir()}
	if key != nil {
		r := keySocket(t, key)
		defer r.Close()
		cmd.ExtraFiles = []*os.File{r}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// The C holder end to end with the Go signer: the command runs without
// the delegation and without descriptor 3, with the session socket; exit
// codes and a signal's 128+N come back; a process of the session is
// served (acknowledged) and a process outside it is refused, the
// positive control of the same request.
func TestHolder(t *testing.T) {
	fe := buildFrontEnd(t)
	goClient := signerScript(t)
	a, _ := session.New()
	del, err := a.Delegate("0123456789ab", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key := []byte(strings.Join(del.Env(), "\n") + "\n")

	out, code := runHolder(t, fe, goClient, key, `env | grep ^LAZARET_; ls /proc/$$/fd; exit 7`)
	if code != 7 || strings.Contains(out, session.EnvDelegatedKey) || strings.Contains(out, session.EnvDelegation) || !strings.Contains(out, escclient.EnvSessionSocket+"=") {
		t.Fatalf("exit %d, environment:\n%s", code, out)
	}
	for _, f := range strings.Fields(out[strings.LastIndex(out, "=")+1:]) {
		if f == "3" {
			t.Fatalf("the command inherited descriptor 3:\n%s", out)
		}
	}
	if _, code := runHolder(t, fe, goClient, key, `kill $$`); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("killed command: exit %d", code)
	}
	// Inside the session: the signer acknowledges, then the request fails
	// for want of TLS material (125); no fallback.
	out, code = runHolder(t, fe, goClient, key, `"$FE" -- echo hi`)
	if code != 125 || strings.Contains(out, "fallback-ran") {
		t.Fatalf("a process of the session was not served: exit %d\n%s", code, out)
	}
	// Outside the session: the same request through the same socket is
	// refused, so the front end falls back.
	dir := t.TempDir()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runHolder(t, fe, goClient, key, `echo "$LAZARET_SESSION_SOCKET" > `+dir+`/sock.tmp; mv `+dir+`/sock.tmp `+dir+`/sock; while [ ! -e `+dir+`/done ]; do sleep 0.05; done`)
	}()
	defer func() { _ = os.WriteFile(filepath.Join(dir, "done"), nil, 0o600); <-done }()
	var sock []byte
	for i := 0; i < 200 && len(sock) == 0; i++ {
		time.Sleep(25 * time.Millisecond)
		sock, _ = os.ReadFile(filepath.Join(dir, "sock"))
	}
	_, se, code := runFE(t, fe, "/", []string{"LAZARET_SESSION_SOCKET=" + strings.TrimSpace(string(sock)), "LAZARET_ESCALATE_FALLBACK=" + goClient}, "lazaret-escalate", "--", "echo", "hi")
	if code != 99 || !strings.Contains(se, "fallback-ran") {
		t.Fatalf("a process outside the session was not refused: exit %d\n%s", code, se)
	}
}

// Without a delegation on descriptor 3 the command still runs, without
// the session socket, and says why.
func TestHolderWithoutKey(t *testing.T) {
	fe := buildFrontEnd(t)
	out, code := runHolder(t, fe, signerScript(t), nil, `env | grep ^LAZARET_SESSION_SOCKET; exit 3`)
	if code != 3 || strings.Contains(out, "LAZARET_SESSION_SOCKET=") || !strings.Contains(out, "no delegation on descriptor 3") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// The delegation on a pipe is refused (another process could reopen
	// a pipe through /proc/PID/fd before the prctl); TestHolder is the
	// control, the same lines on a socket.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := session.New()
	del, _ := a.Delegate("0123456789ab", time.Hour, time.Now())
	_, _ = w.WriteString(strings.Join(del.Env(), "\n") + "\n")
	w.Close()
	cmd := exec.Command(fe, "__session", "--", "sh", "-c", `env | grep ^LAZARET_SESSION_SOCKET; exit 0`)
	cmd.ExtraFiles = []*os.File{r}
	out2, _ := cmd.CombinedOutput()
	r.Close()
	if strings.Contains(string(out2), "LAZARET_SESSION_SOCKET=") || !strings.Contains(string(out2), "no delegation on descriptor 3") {
		t.Fatalf("a delegation on a pipe was taken:\n%s", out2)
	}
	if _, code := runHolder(t, fe, signerScript(t), nil, `exec /nonexistent-lz`); code != 127 {
		t.Fatalf("missing command: exit %d", code)
	}
}

// --pidfile records the command's own pid (the CLI signals it there), and
// a symlink planted at that path is not followed.
func TestHolderPidfile(t *testing.T) {
	fe := buildFrontEnd(t)
	dir := t.TempDir()
	pidfile, self := filepath.Join(dir, "pid"), filepath.Join(dir, "self")
	cmd := exec.Command(fe, "__session", "--pidfile", pidfile, "--", "sh", "-c", `echo $$ > "$0"`, self)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got, _ := os.ReadFile(pidfile)
	want, _ := os.ReadFile(self)
	if len(want) == 0 || string(got) != string(want) {
		t.Fatalf("pidfile %q, command's pid %q", got, want)
	}
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(fe, "__session", "--pidfile", link, "--", "true").CombinedOutput()
	if _, err := os.Stat(target); err == nil || !strings.Contains(string(out), "cannot record the command's pid") {
		t.Fatalf("the pidfile symlink was followed (or not reported): %s", out)
	}
}

// TestHolderCommandNotRun: a command that cannot be run is reported as a
// shell would (127 not found, 126 not runnable), under lazaret's name, not
// the holder's: the user ran `lazaret exec`.
func TestHolderCommandNotRun(t *testing.T) {
	fe := buildFrontEnd(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd, stderr string
		code        int
	}{
		{"no-such-command-here", "lazaret: no-such-command-here: command not found\n", 127},
		{notExec, "lazaret: " + notExec + ": Permission denied\n", 126},
	} {
		cmd := exec.Command(fe, "__session", "--", c.cmd)
		// The delegation as the CLI sends it, so the holder has nothing
		// of its own to say.
		r := keySocket(t, []byte(session.EnvSessionID+"=x\n"))
		defer r.Close()
		cmd.ExtraFiles = []*os.File{r}
		var errb strings.Builder
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code || errb.String() != c.stderr {
			t.Errorf("%s: %v, stderr %q; want exit %d, %q", c.cmd, err, errb.String(), c.code, c.stderr)
		}
	}
}

// TestHolderStdin: in --stdin mode (the Kubernetes backend) the holder
// writes the ready marker before reading anything, then takes exactly the
// frame from stdin: the command gets the rest of stdin, the --env
// variables and the session socket, never the delegation. A malformed
// frame leaves the session without escalation, the command still runs.
func TestHolderStdin(t *testing.T) {
	fe := buildFrontEnd(t)
	s, err := session.New()
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Delegate("sandbox", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	frame, err := d.StdinFrame()
	if err != nil {
		t.Fatal(err)
	}
	run := func(stdin []byte) (string, string) {
		cmd := exec.Command(fe, "__session", "--stdin", "--path-append", "/bin", "--path-append", "/x/bin", "--env", "LAZARET_TLS_DIR=/x/tls", "--", "sh", "-c", `env | grep -E '^(LAZARET_|PATH=)' | sort; cat`)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + t.TempDir()}
		var out, errOut bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %s", err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	out, errOut := run(append(frame, "user input"...))
	rest, ok := strings.CutPrefix(out, session.HolderReady)
	if !ok {
		t.Fatalf("output does not start with the marker: %q", out)
	}
	if !strings.Contains(rest, "LAZARET_SESSION_SOCKET=") || !strings.Contains(rest, "LAZARET_TLS_DIR=/x/tls") || !strings.HasSuffix(rest, "user input") ||
		!strings.Contains(rest, "PATH=/usr/bin:/bin:/x/bin\n") {
		t.Errorf("command saw %q (stderr %q)", rest, errOut)
	}
	if strings.Contains(rest, "LAZARET_DELEGATED_KEY") || strings.Contains(rest, "LAZARET_DELEGATION") {
		t.Errorf("the delegation reached the command: %q", rest)
	}
	out, errOut = run([]byte("zzzzwhatever"))
	if strings.Contains(out, "LAZARET_SESSION_SOCKET=") || !strings.Contains(errOut, "no delegation on stdin") {
		t.Errorf("malformed frame: stdout %q stderr %q", out, errOut)
	}
}
