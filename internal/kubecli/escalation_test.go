package kubecli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// escBinaries builds the in-sandbox client (C front end and holder, Go
// client and relay) of this tree.
func escBinaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the escalation client")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	gb := exec.Command("go", "build", "-o", filepath.Join(dir, "lazaret-escalate-go"), "../../cmd/lazaret-escalate-go")
	gb.Env = append(os.Environ(), "CGO_ENABLED=0")
	cb := exec.Command(gcc, "-static", "-O2", "-Wall", "-o", filepath.Join(dir, "lazaret-escalate"), "../../cmd/lazaret-escalate/main.c", "../../cmd/lazaret-escalate/holder.c")
	for _, c := range []*exec.Cmd{gb, cb} {
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c.Args, err, out)
		}
	}
	return dir
}

// localArgv is a pod exec's argv for a local process: the client's
// binaries are bin's, the session directories under escRunDir are
// root's.
func localArgv(command []string, bin, root string) []string {
	args := make([]string, len(command))
	for i, a := range command {
		a = strings.ReplaceAll(a, escrelay.BinDir+"/lazaret-escalate", bin+"/lazaret-escalate")
		args[i] = strings.ReplaceAll(a, escRunDir+"/", root+"/")
	}
	return args
}

// localPod runs the "pod's" execs as local processes (localArgv).
func localPod(t *testing.T, bin, root string) func(kube.ExecRequest) (int, error) {
	return func(r kube.ExecRequest) (int, error) {
		args := localArgv(r.Command, bin, root)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + root, "LAZARET_ESCALATE_FALLBACK=" + bin + "/lazaret-escalate-go",
			"LAZARET_ESCALATE_CWD=/workspace", "FE=" + bin + "/lazaret-escalate"}
		cmd.Stdout, cmd.Stderr = r.Stdout, r.Stderr
		// As an exec stream: the process's end ends the call, whatever
		// stdin still does.
		w, err := cmd.StdinPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		if r.Stdin != nil {
			go func() { _, _ = io.Copy(w, r.Stdin); w.Close() }()
		} else {
			w.Close()
		}
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), nil
		}
		return 0, err
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEscalationThroughTheRelay: the whole path with the real client and
// a "pod" of local processes: the relay's exec, the holder taking the
// delegation from stdin after its marker (stdin left open, as a
// terminal's), the signer, the relay's framing, the shared server: an
// auto-approved command runs in the host workspace and its output comes
// back; one the policy does not approve, without a terminal, is denied.
func TestEscalationThroughTheRelay(t *testing.T) {
	bin := escBinaries(t)
	e := newEnv(t, "[escalation]\nauto_approve = [\"cat host-marker\"]\n[cluster]\nnamespace = \"agents\"\n[profiles.dev]\nimage = \"agent:1\"\n")
	e.record(enforced)
	e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
	if err := os.WriteFile(filepath.Join(e.ws, "host-marker"), []byte("from-the-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cluster.Exec.Run = localPod(t, bin, t.TempDir())
	run := func(script string) (string, int) {
		pr, pw := io.Pipe()
		defer pw.Close()
		var out, errOut lockedBuf
		g := newGlobals(IO{In: pr, Out: &out, ErrOut: &errOut})
		g.connect = func(config.Cluster) (*kube.Client, error) { return e.cluster.Client, nil }
		g.now = func() time.Time { return fixedNow }
		g.poll = time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan int, 1)
		go func() {
			done <- run(g, []string{"lazaret-kube", "--config", e.cfgFile, "--workspace", e.ws, "exec", "dev", "--", "sh", "-c", script})
		}()
		select {
		case code := <-done:
			return out.String() + errOut.String(), code
		case <-ctx.Done():
			t.Fatalf("%s: no end\nstdout: %s\nstderr: %s", script, out.String(), errOut.String())
		}
		return "", 0
	}
	out, code := run(`"$FE" -- cat host-marker; echo after`)
	if code != 0 || !strings.Contains(out, "from-the-host") || !strings.Contains(out, "after") || strings.Contains(out, "holder-ready") {
		t.Fatalf("auto-approved: exit %d\n%s", code, out)
	}
	out, code = run(`"$FE" -- touch host-written`)
	if code != 126 {
		t.Fatalf("not approved, no terminal: exit %d, want 126\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "host-written")); err == nil {
		t.Fatal("the unapproved command ran")
	}
}

// TestEscalationPromptOnTheTerminal: a TTY session asks its terminal: the
// prompt shows the request and A runs it on the host, D denies it; the
// pod's output resumes after.
func TestEscalationPromptOnTheTerminal(t *testing.T) {
	bin := escBinaries(t)
	e := newEnv(t, "[cluster]\nnamespace = \"agents\"\n[profiles.dev]\nimage = \"agent:1\"\n")
	e.record(enforced)
	e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
	e.cluster.Exec.Run = localPod(t, bin, t.TempDir())
	for _, c := range []struct {
		key, word, want string
		created         bool
	}{{"a", "approved", "rc=0", true}, {"d", "denied", "rc=126", false}} {
		tm := ptytest.Open(t)
		g := newGlobals(IO{In: tm.TTY, Out: tm.TTY, ErrOut: tm.TTY})
		g.connect = func(config.Cluster) (*kube.Client, error) { return e.cluster.Client, nil }
		g.now = func() time.Time { return fixedNow }
		g.poll = time.Millisecond
		done := make(chan int, 1)
		go func() {
			done <- run(g, []string{"lazaret-kube", "--config", e.cfgFile, "--workspace", e.ws, "exec", "-t", "dev", "--", "sh", "-c",
				`"$FE" --reason "need host" -- touch "$1"; echo "rc=$?"`, "sh", c.word})
		}()
		tm.WaitFor(t, "abort lazaret")
		// The readability gate drops keys until the prompt was readable.
		time.Sleep(prompt.MinReadable + 200*time.Millisecond)
		if !tm.Shows("need host") || !tm.Shows("/usr/bin/touch") {
			t.Fatalf("prompt:\n%s", tm.Output())
		}
		_, _ = tm.Ptmx.Write([]byte(c.key))
		tm.WaitFor(t, c.want)
		<-done
		if _, err := os.Stat(filepath.Join(e.ws, c.word)); (err == nil) != c.created {
			t.Errorf("%s: host file exists %v, want %v\n%s", c.key, err == nil, c.created, tm.Output())
		}
	}
}
