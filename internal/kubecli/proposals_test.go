package kubecli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/netdpod"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// TestProposalsOnTheTerminal: a cluster session's agent proposes an
// auto_approve entry through the relay; it is shown on the session's
// terminal as a proposal and [A] approves it, so the agent's --wait exits
// 0 and the command then runs on the host without a second prompt (this
// configuration has no auto_approve: the rule is what the user approved).
// Network proposals: TestNetProposalOnTheTerminal.
func TestProposalsOnTheTerminal(t *testing.T) {
	bin := escBinaries(t)
	e := newEnv(t, "[cluster]\nnamespace = \"agents\"\n[profiles.dev]\nimage = \"agent:1\"\n")
	e.record(enforced)
	e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
	if err := os.WriteFile(filepath.Join(e.ws, "host-marker"), []byte("from-the-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cluster.Exec.Run = localPod(t, bin, t.TempDir())
	tm := ptytest.Open(t)
	g := newGlobals(IO{In: tm.TTY, Out: tm.TTY, ErrOut: tm.TTY})
	g.connect = func(config.Cluster) (*kube.Client, error) { return e.cluster.Client, nil }
	g.now = func() time.Time { return fixedNow }
	g.poll = time.Millisecond
	script := `id=$("$FE" --propose exec --why "read the marker" -- cat host-marker); "$FE" --wait "$id"; echo "wait=$?"; "$FE" -- cat host-marker; echo "rc=$?"`
	done := make(chan int, 1)
	go func() {
		done <- run(g, []string{"lazaret-kube", "--config", e.cfgFile, "--workspace", e.ws, "exec", "-t", "dev", "--", "sh", "-c", script})
	}()
	tm.WaitFor(t, "abort lazaret")
	time.Sleep(prompt.MinReadable + 200*time.Millisecond) // the readability gate
	for _, want := range []string{"proposes a policy rule", "auto_approve += cat host-marker", "read the marker"} {
		if !tm.Shows(want) {
			t.Fatalf("prompt lacks %q:\n%s", want, tm.Output())
		}
	}
	_, _ = tm.Ptmx.Write([]byte("a"))
	tm.WaitFor(t, "rc=0")
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("no end")
	}
	out := tm.Output()
	for _, want := range []string{"wait=0", "from-the-host"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "abort lazaret") > 2 {
		t.Errorf("the approved rule was asked about again:\n%s", out)
	}
}

// localNetd runs the real lazaret-netd in pod mode as a local process
// (policy file, resolver on a free loopback port, control socket in a
// temporary directory) and returns an Exec.Run that sends the execs into
// its container (`/lazaret-netd ctl`) to it, the others to next; and the
// control socket and the resolver's address.
func localNetd(t *testing.T, next func(kube.ExecRequest) (int, error)) (func(kube.ExecRequest) (int, error), string, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "lazaret-netd")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/lazaret-netd").CombinedOutput(); err != nil {
		t.Fatalf("build lazaret-netd: %v\n%s", err, out)
	}
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, []byte(`{"allow_domains":[{"pattern":"ok.example"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.LocalAddr().String()
	l.Close()
	sock := filepath.Join(dir, "control.sock")
	cmd := exec.Command(bin, "--pod", "--policy-file", policy, "--upstream", "127.0.0.1:9", "--listen", listen, "--control", sock)
	var logs lockedBuf
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for {
		if st, err := (&netdapi.Client{Socket: sock}).Status(context.Background()); err == nil && st.Applied {
			break
		}
		if cmd.ProcessState != nil {
			t.Fatalf("netd ended: %s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	run := func(r kube.ExecRequest) (int, error) {
		if r.Container != netdpod.ContainerName {
			return next(r)
		}
		if !slices.Equal(r.Command, []string{"/lazaret-netd", "ctl"}) {
			return 0, &kube.StartError{Code: 127, Err: fmt.Errorf("unexpected command in netd's container: %q", r.Command)}
		}
		c := exec.Command(bin, "ctl", sock)
		c.Stdin, c.Stdout, c.Stderr = r.Stdin, r.Stdout, r.Stderr
		err := c.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), nil
		}
		return 0, err
	}
	return run, sock, listen
}

// TestNetProposalOnTheTerminal: on Kubernetes a network proposal reaches
// the pod's running netd. --denials lists the name netd refused; an
// address range is refused at once saying it is the NetworkPolicy's (and
// a checker's refusal holds as locally: a special range); a name waits
// for the session's terminal, netd's allowlist lacks it until [A] (the
// control) and has it at once after, by an exec into netd's container,
// and the agent's --wait exits 0.
func TestNetProposalOnTheTerminal(t *testing.T) {
	bin := escBinaries(t)
	e := newEnv(t, "[cluster]\nnamespace = \"agents\"\n[profiles.dev]\nimage = \"agent:1\"\nallow_domains = [\"ok.example\"]\n")
	e.record(enforced)
	e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
	var sock, resolver string
	e.cluster.Exec.Run, sock, resolver = localNetd(t, localPod(t, bin, t.TempDir()))
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", resolver)
	}}
	if _, err := r.LookupHost(context.Background(), "denied.example"); err == nil {
		t.Fatal("netd resolved a name outside its policy")
	}
	netd := &netdapi.Client{Socket: sock}
	tm := ptytest.Open(t)
	g := newGlobals(IO{In: tm.TTY, Out: tm.TTY, ErrOut: tm.TTY})
	g.connect = func(config.Cluster) (*kube.Client, error) { return e.cluster.Client, nil }
	g.now = func() time.Time { return fixedNow }
	g.poll = time.Millisecond
	script := `"$FE" --denials; echo "denials=$?"; "$FE" --propose net 8.8.8.0/24; echo "cidr=$?"; "$FE" --propose net 10.0.0.0/8; echo "special=$?"; ` +
		`id=$("$FE" --propose net --why "the docs" docs.example); "$FE" --wait "$id"; echo "wait=$?"`
	done := make(chan int, 1)
	go func() {
		done <- run(g, []string{"lazaret-kube", "--config", e.cfgFile, "--workspace", e.ws, "exec", "-t", "dev", "--", "sh", "-c", script})
	}()
	tm.WaitFor(t, "abort lazaret")
	time.Sleep(prompt.MinReadable + 200*time.Millisecond) // the readability gate
	for _, want := range []string{"proposes a policy rule", "allow_domains += docs.example", "the docs"} {
		if !tm.Shows(want) {
			t.Fatalf("prompt lacks %q:\n%s", want, tm.Output())
		}
	}
	if st, err := netd.Status(context.Background()); err != nil || len(st.Policy.AllowDomains) != 1 {
		t.Fatalf("netd before the answer: %+v %v, want only ok.example", st, err)
	}
	_, _ = tm.Ptmx.Write([]byte("a"))
	tm.WaitFor(t, "wait=")
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("no end")
	}
	out := tm.Output()
	for _, want := range []string{"dns denied.example", "denials=0", "cidr=126", "NetworkPolicy", "allow_egress", "special=126", "special-range", "wait=0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	st, err := netd.Status(context.Background())
	if err != nil || len(st.Policy.AllowDomains) != 2 || st.Policy.AllowDomains[1].Pattern != "docs.example" || len(st.Policy.AllowEgress) != 0 {
		t.Fatalf("netd after the approval: %+v %v", st, err)
	}
}

// TestProposalsVerb: `lazaret --backend kubernetes proposals` is the
// local CLI's verb (its syntax and usage errors); it resolves the target
// first (a wrong profile is told as such, the control) and, with no
// session of it running here, says in one line where proposals live.
// Nothing reaches the cluster. With sessions: TestProposalsOverSessions.
func TestProposalsVerb(t *testing.T) {
	e := newEnv(t, "[cluster]\nnamespace = \"agents\"\n[profiles.dev]\nimage = \"agent:1\"\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"proposals", "dev"}, 1, "no cluster session of profile dev runs"},
		{[]string{"proposals", "approve", "dev", "1a2b3c4d", "--save"}, 1, "proposals wait in a running session's lazaret-kube process"},
		{[]string{"proposals", "nope"}, 2, `"nope"`},
		{[]string{"proposals", "approve"}, 2, "accepts between 1 and 2 arg(s)"},
		{[]string{"proposals", "deny", "x", "--hash", "h"}, 2, "unknown flag: --hash"},
	} {
		var out, errb bytes.Buffer
		g := newGlobals(IO{In: strings.NewReader(""), Out: &out, ErrOut: &errb})
		g.connect = func(config.Cluster) (*kube.Client, error) { return e.cluster.Client, nil }
		code := run(g, append([]string{"lazaret-kube", "--config", e.cfgFile, "--workspace", e.ws}, c.args...))
		if code != c.code || !strings.Contains(errb.String(), c.want) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out.String(), errb.String(), c.code, c.want)
		}
	}
	if n := len(e.cluster.Exec.Requests()); n != 0 {
		t.Errorf("%d execs", n)
	}
}
