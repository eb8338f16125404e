package kubecli

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
)

// cuttablePod runs the "pod's" execs as local processes (the client's
// binaries are bin's, the pod's run directory root) and can cut the
// current link: it kills the exec's own process, as a lost API server
// connection ends the exec, while whatever that process started in its
// own session (the keeper) goes on.
type cuttablePod struct {
	bin, root string
	mu        sync.Mutex
	current   *exec.Cmd
	links     int
}

func (p *cuttablePod) Exec(ctx context.Context, r kube.ExecRequest) (int, error) {
	args := localArgv(r.Command, p.bin, p.root)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + p.root}
	cmd.Stdout, cmd.Stderr = r.Stdout, r.Stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.current = cmd
	p.links++
	p.mu.Unlock()
	go func() { _, _ = io.Copy(w, r.Stdin); w.Close() }()
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() >= 0 {
		return ee.ExitCode(), nil
	}
	return 0, err // killed: the link was cut
}

func (p *cuttablePod) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.current.Process.Kill()
}

func podTermEnv(t *testing.T) (*globals, *kube.Client, *cuttablePod) {
	pod := &cuttablePod{bin: escBinaries(t), root: t.TempDir()}
	c := &kube.Client{Namespace: "agents", Exec: pod,
		Core: fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "agents"}})}
	g := newGlobals(IO{})
	g.log = slog.New(slog.DiscardHandler)
	return g, c, pod
}

// waitOut waits for s in out.
func waitOut(t *testing.T, out *lockedBuf, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", s, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPodTermRelinks: the link to the pod's keeper is cut twice while
// its command runs; runPodTerm says so once per loss, links again, and
// the command's output arrives whole and once, a line typed while the
// link was down reaches it, and its exit code is the session's.
func TestPodTermRelinks(t *testing.T) {
	g, c, pod := podTermEnv(t)
	in, keys := io.Pipe()
	defer keys.Close()
	var out lockedBuf
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	script := `echo one; read x; echo got:$x; read y; sleep 1; for i in 1 2 3; do echo n$i; done; exit 7`
	var mu sync.Mutex
	var states []bool
	go func() {
		code, err := g.runPodTerm(c, podTermRequest{pod: "p", id: "s1", command: []string{"sh", "-c", script}, in: in, out: &out,
			linkState: func(lost bool) { mu.Lock(); states = append(states, lost); mu.Unlock() }})
		done <- result{code, err}
	}()
	waitOut(t, &out, "one")
	pod.cut()
	waitOut(t, &out, "lost the link to pod p")
	_, _ = keys.Write([]byte("hello\n"))
	waitOut(t, &out, "got:hello")
	time.Sleep(linkUp + time.Second) // the new link holds: back
	pod.cut()
	for deadline := time.Now().Add(20 * time.Second); strings.Count(out.String(), "lost the link") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the second loss was not told:\n%s", out.String())
		}
	}
	_, _ = keys.Write([]byte("\n")) // typed while the link is down: the next one takes it
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the session did not end:\n%s", out.String())
	}
	if r.err != nil || r.code != 7 {
		t.Fatalf("runPodTerm = %d, %v; want 7\n%s", r.code, r.err, out.String())
	}
	s := out.String()
	for _, want := range []string{"one", "got:hello", "n1", "n2", "n3"} {
		if n := strings.Count(s, want+"\r\n"); n != 1 {
			t.Errorf("%q shown %d times:\n%s", want, n, s)
		}
	}
	if n := strings.Count(s, "lost the link"); n != 2 {
		t.Errorf("the loss told %d times for 2 cuts:\n%s", n, s)
	}
	mu.Lock()
	if len(states) < 3 || !states[0] || states[1] || !states[2] {
		t.Errorf("link states %v, want lost, back, lost (then back or not)", states)
	}
	mu.Unlock()
	if pod.links < 3 {
		t.Errorf("%d links for 2 cuts", pod.links)
	}
}

// TestPodTermHangup: a hang-up (the local keeper ending the session)
// reaches the command in the pod, also when it comes while the link is
// down.
func TestPodTermHangup(t *testing.T) {
	g, c, pod := podTermEnv(t)
	in, keys := io.Pipe()
	defer keys.Close()
	var out lockedBuf
	hangup := make(chan struct{})
	done := make(chan int, 1)
	go func() {
		code, _ := g.runPodTerm(c, podTermRequest{pod: "p", id: "s2", command: []string{"sh", "-c", "echo up; exec sleep 600"}, in: in, out: &out, hangup: hangup})
		done <- code
	}()
	waitOut(t, &out, "up")
	pod.cut()
	close(hangup)
	select {
	case code := <-done:
		if code != 129 {
			t.Errorf("exit %d after a hang-up, want 129 (SIGHUP)\n%s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the hang-up did not end the command:\n%s", out.String())
	}
}

// TestRelinkBackoff: 1 s after a link that held, then doubling to 10 s.
func TestRelinkBackoff(t *testing.T) {
	var b relinkBackoff
	var got []time.Duration
	for _, held := range []bool{false, false, false, false, false, true, false} {
		got = append(got, b.next(held))
	}
	want := []time.Duration{relinkFirst, 2 * relinkFirst, 4 * relinkFirst, 8 * relinkFirst, relinkMax, relinkFirst, 2 * relinkFirst}
	if !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}
