//go:build kube

package kube_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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
)

// apiProxy stands between lazaret and the API server as the laptop's
// network does: cut drops every connection and refuses new ones (the
// lid closed, the Wi-Fi gone), restore lets them through again.
type apiProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func startAPIProxy(t *testing.T, target string) *apiProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &apiProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *apiProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *apiProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// setCut drops every connection and refuses new ones (true), or lets
// them through again (false).
func (p *apiProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// viaProxy points the test's lazaret configuration at a copy of the
// cluster's kubeconfig whose server is a proxy the test can cut.
func (e *backendEnv) viaProxy() *apiProxy {
	e.t.Helper()
	raw, err := os.ReadFile(e.kubecfg)
	if err != nil {
		e.t.Fatal(err)
	}
	re := regexp.MustCompile(`server: https://([^\s]+)`)
	m := re.FindSubmatch(raw)
	if m == nil {
		e.t.Fatalf("no server in %s", e.kubecfg)
	}
	p := startAPIProxy(e.t, string(m[1]))
	proxied := re.ReplaceAll(raw, []byte("server: https://"+p.ln.Addr().String()))
	kc := filepath.Join(filepath.Dir(e.cfg), "kubeconfig-proxied")
	if err := os.WriteFile(kc, proxied, 0o600); err != nil {
		e.t.Fatal(err)
	}
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "kubeconfig = "+strconv.Quote(e.kubecfg), "kubeconfig = "+strconv.Quote(kc), 1))
	if err := os.WriteFile(e.cfg, cfg, 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// inPod runs a shell line in the workspace's pod with kubectl, straight
// to the API server (not through the proxy).
func (e *backendEnv) inPod(pod, line string) string {
	e.t.Helper()
	return e.kube("-n", e.namespace, "exec", pod, "-c", "agent", "--", "sh", "-c", line)
}

// TestBackendSessionSurvivesLinkLoss is issue #35's "a cluster session
// survives the laptop closing": a kept session's link to its pod is cut
// (every connection to the API server dropped, new ones refused) while
// its command runs. The command goes on in the pod, its output is kept
// there, and the host escalation request it makes while nobody can be
// reached waits in the pod's relay. Once the network is back, the
// session's lazaret-kube links again by itself: the request becomes
// pending here, is approved from another terminal, the command runs on
// the host, and attach shows what the agent printed while away, once.
//
// Control: a session that is not kept (a plain `exec`, the exec's own
// stream) is lost with the same cut: its lazaret ends with an error.
func TestBackendSessionSurvivesLinkLoss(t *testing.T) {
	e := newUnattendedEnv(t)
	pod := e.workspacePod()
	proxy := e.viaProxy()

	// The control: a plain exec ticking into a file of its own.
	control := e.background("", "exec", "e2e", "--", "sh", "-c", `i=0; while :; do i=$((i+1)); echo $i >/tmp/control-ticks; sleep 1; done`)
	script := `i=0; while [ ! -e /tmp/go-on ]; do i=$((i+1)); echo $i >/tmp/ticks; sleep 1; done; ` +
		`echo AWAY-$((6*7)); ` + escClient + ` --reason "while away" -- touch approved-file; echo "rc=$?"; read line`
	id := strings.TrimSpace(e.mustLazaret(nil, "exec", "-t", "--detach", "e2e", "--", "sh", "-c", script))
	if len(id) != 12 {
		t.Fatalf("exec --detach printed %q, not a session id", id)
	}
	ticks := func(file string) int {
		n, _ := strconv.Atoi(strings.TrimSpace(e.inPod(pod, "cat "+file+" 2>/dev/null || echo 0")))
		return n
	}
	waitTicking(t, func() int { return ticks("/tmp/ticks") })
	waitTicking(t, func() int { return ticks("/tmp/control-ticks") })

	proxy.setCut(true)
	time.Sleep(3 * time.Second)
	e.inPod(pod, "touch /tmp/go-on") // the agent goes on while this machine is away
	time.Sleep(8 * time.Second)      // it prints, and asks, with nobody linked
	// ps, with the cluster out of reach, still lists this machine's kept
	// session, and what it waits on: its link.
	if out, errOut, code := e.lazaret(nil, "ps"); code == 0 || !strings.Contains(out, id) || !strings.Contains(out, "link lost since") {
		t.Errorf("ps during the cut: exit %d\n%s%s", code, out, errOut)
	}
	if out := e.inPod(pod, "ps -o args 2>/dev/null || ps"); !strings.Contains(out, "while away") {
		t.Errorf("the kept command did not survive the cut; the pod runs:\n%s", out)
	}
	proxy.setCut(false)
	// The control: without the pod's keeper the session is lost with its
	// link (its command may run on in the pod, out of reach).
	if code, ok := control.ended(t, 30*time.Second); !ok || code == 0 {
		t.Errorf("control: the plain exec went on after its link was cut (ended %v, exit %d):\n%s", ok, code, control.output())
	}

	p := waitPending(t, e, id)
	if !strings.Contains(p.Detail, "approved-file") {
		t.Fatalf("pending request %+v", p)
	}
	e.mustLazaret(nil, "approvals", "answer", p.ID, "approve", "--hash", p.Hash)
	tm, cmd := e.attachOnTerminal(id)
	tm.WaitFor(t, "rc=0")
	if _, err := os.Stat(filepath.Join(e.ws, "approved-file")); err != nil {
		t.Errorf("the approved command did not run on the host: %v", err)
	}
	_, _ = tm.Ptmx.Write([]byte("\r"))
	if err := cmd.Wait(); err != nil {
		t.Errorf("attach did not end with the session: %v\n%s", err, tm.Output())
	}
	screen := tm.Output()
	if strings.Count(screen, "AWAY-42") != 1 || !strings.Contains(screen, "lost the link to pod") {
		t.Errorf("attach does not show, once, what the agent printed while away, and the notice:\n%s", screen)
	}
}

// waitTicking waits until a counter read by get grows.
func waitTicking(t *testing.T, get func() int) {
	t.Helper()
	first, deadline := get(), time.Now().Add(2*time.Minute)
	for get() <= first || first == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the command in the pod is not running")
		}
		time.Sleep(time.Second)
		if first == 0 {
			first = get()
		}
	}
}

type pendingRequest struct {
	ID, Hash, Session, Detail string
}

// waitPending waits for a pending request of session id.
func waitPending(t *testing.T, e *backendEnv, id string) pendingRequest {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var pending []pendingRequest
		if err := json.Unmarshal([]byte(e.mustLazaret(nil, "approvals", "--json")), &pending); err != nil {
			t.Fatal(err)
		}
		for _, p := range pending {
			if strings.HasPrefix(p.Session, id) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no pending request appeared after the link came back")
		}
		time.Sleep(time.Second)
	}
}

// workspacePod is the pod of this workspace's claim, from `status`.
func (e *backendEnv) workspacePod() string {
	e.t.Helper()
	for _, line := range strings.Split(e.mustLazaret(nil, "status", "e2e"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "pod:" {
			return f[1]
		}
	}
	e.t.Fatal("status names no pod")
	return ""
}

// ended waits for the background lazaret to end and returns its exit
// code (its stdin stays open: the process, not exec's copying, is waited
// for).
func (p *escProc) ended(t *testing.T, within time.Duration) (int, bool) {
	t.Helper()
	done := make(chan int, 1)
	go func() {
		st, err := p.cmd.Process.Wait()
		if err != nil {
			done <- -1
			return
		}
		done <- st.ExitCode()
	}()
	select {
	case code := <-done:
		return code, true
	case <-time.After(within):
		return 0, false
	}
}

// TestBackendKeptWithoutEscalation: with [escalation] enabled = false a
// kept cluster session still runs under the pod's terminal keeper (the
// in-pod client is installed either way): it goes on through a cut of
// its link, and attach shows what it printed meanwhile, once. Before,
// such a session was the exec's own TTY and ended with the cut
// (TestBackendSessionSurvivesLinkLoss's control is that plain exec).
func TestBackendKeptWithoutEscalation(t *testing.T) {
	e := newKeptEnv(t, "allow_unenforced_egress = true\n[escalation]\nenabled = false")
	pod := e.workspacePod()
	proxy := e.viaProxy()
	id, running := e.startKeptScript(pod, `echo AWAY-$((6*7)); read line; exit 3`)
	proxy.setCut(true)
	time.Sleep(3 * time.Second)
	e.inPod(pod, "touch /tmp/go-on") // it prints with nobody linked
	time.Sleep(5 * time.Second)
	if out, errOut, code := e.lazaret(nil, "ps"); code == 0 || !strings.Contains(out, id) || !strings.Contains(out, "link lost since") {
		t.Errorf("ps during the cut: exit %d\n%s%s", code, out, errOut)
	}
	if !running() {
		t.Fatal("the kept command did not survive the cut")
	}
	proxy.setCut(false)
	tm, cmd := e.attachOnTerminal(id)
	tm.WaitFor(t, "AWAY-42")
	_, _ = tm.Ptmx.Write([]byte("\r"))
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("attach did not end with the session's exit 3: %v\n%s", err, tm.Output())
	}
	if screen := tm.Output(); strings.Count(screen, "AWAY-42") != 1 || !strings.Contains(screen, "lost the link to pod") {
		t.Errorf("attach does not show, once, what the command printed while away, and the notice:\n%s", screen)
	}
}

// TestBackendSessionTakenBack: a kept cluster session outlives its
// lazaret-kube on this machine, and `attach` takes it back.
//
//  1. A shutdown: SIGTERM to the keeper, which passes it to its
//     lazaret-kube. The session goes on in the pod, ps offers it, attach
//     takes it back; closing that terminal detaches.
//  2. A death: SIGKILL of the lazaret-kube that took it back (what the
//     out-of-memory killer or a power loss leaves). The command prints
//     and asks with nobody here: the request waits in the pod's relay.
//     attach takes it back again: what was printed is on the screen, the
//     request becomes pending (the pod's client retries it under the new
//     Trust Anchor), is approved, runs on the host, and the session's own
//     exit code ends attach. Its record is gone after that.
//
// Control: while its lazaret-kube lives, ps does not offer the session to
// be taken back. (Run by hand: with the keeper hanging the session up on
// SIGTERM, as it does for a local one, step 1 fails: "a shutdown ended
// the session in the pod".)
func TestBackendSessionTakenBack(t *testing.T) {
	e := newUnattendedEnv(t)
	pod := e.workspacePod()
	id, running := e.startKeptScript(pod, `echo DEAD-$((6*7)); `+escClient+` --reason "while dead" -- touch resumed-file; echo "rc=$?"; read line; exit 4`)
	const offered = "attach takes it back"
	if out := e.mustLazaret(nil, "ps"); !strings.Contains(out, id) || strings.Contains(out, offered) {
		t.Fatalf("control: ps before the kill:\n%s", out)
	}

	// SIGTERM to the keeper alone: at a shutdown its lazaret-kube gets one
	// too, but the keeper's own must not hang the session up first.
	keeper := e.keeperPID(id)
	_ = syscall.Kill(keeper, syscall.SIGTERM)
	waitGone(t, keeper)
	if !running() {
		t.Fatal("a shutdown ended the session in the pod")
	}
	if out := e.mustLazaret(nil, "ps"); !strings.Contains(out, id) || !strings.Contains(out, offered) {
		t.Fatalf("ps after a shutdown does not offer the session to be taken back:\n%s", out)
	}
	tm, cmd := e.attachOnTerminal(id)
	tm.WaitFor(t, "taking session")
	_ = cmd.Process.Kill() // the terminal closes: the session is detached
	_ = cmd.Wait()

	keeper = e.keeperPID(id)
	if err := syscall.Kill(innerOf(t, keeper), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, keeper)
	e.inPod(pod, "touch /tmp/go-on") // it prints and asks with no lazaret-kube
	time.Sleep(4 * time.Second)
	if !strings.Contains(e.inPod(pod, "ps -o args 2>/dev/null || ps"), "while dead") {
		t.Fatal("the command did not go on in the pod")
	}
	if out := e.mustLazaret(nil, "ps"); !strings.Contains(out, id) || !strings.Contains(out, offered) {
		t.Fatalf("ps does not offer the session to be taken back:\n%s", out)
	}

	tm, cmd = e.attachOnTerminal(id)
	// A hang shows the screen (the resumed lazaret-kube writes there).
	watchdog := time.AfterFunc(4*time.Minute, func() {
		t.Errorf("attach still runs after 4 min; its screen:\n%s", tm.Output())
		_ = cmd.Process.Kill()
	})
	defer watchdog.Stop()
	p := waitPending(t, e, id)
	if !strings.Contains(p.Detail, "resumed-file") {
		t.Fatalf("pending request %+v", p)
	}
	e.mustLazaret(nil, "approvals", "answer", p.ID, "approve", "--hash", p.Hash)
	tm.WaitFor(t, "rc=0")
	if _, err := os.Stat(filepath.Join(e.ws, "resumed-file")); err != nil {
		t.Errorf("the approved command did not run on the host: %v", err)
	}
	// The prompt was on this terminal when another one answered: the keys
	// of the next second are dropped (prompt.MinReadable), by design.
	time.Sleep(2 * time.Second)
	_, _ = tm.Ptmx.Write([]byte("\r"))
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Errorf("attach did not end with the session's exit 4: %v\n%s", err, tm.Output())
	}
	if screen := tm.Output(); strings.Count(screen, "DEAD-42") != 1 || !strings.Contains(screen, "taking session") {
		t.Errorf("attach does not show, once, what the command printed meanwhile:\n%s", screen)
	}
	if out := e.mustLazaret(nil, "ps"); strings.Contains(out, id) {
		t.Errorf("the ended session is still listed:\n%s", out)
	}
}

// innerOf is the pid of the lazaret-kube a keeper runs.
func innerOf(t *testing.T, keeper int) int {
	t.Helper()
	// Each thread of the keeper lists the children it started.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", keeper))
	var children []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		children = append(children, strings.Fields(string(b))...)
	}
	if len(children) == 1 {
		if pid, err := strconv.Atoi(children[0]); err == nil {
			return pid
		}
	}
	t.Fatalf("the keeper's lazaret-kube: children %q", children)
	return 0
}

// waitGone waits for the process pid to end.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("process %d is still there", pid)
		}
	}
}

// keeperPID is the pid of the keeper of the kept session id, once its
// lazaret-kube has told it the session's id.
func (e *backendEnv) keeperPID(id string) int {
	e.t.Helper()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "lazaret", "keep", "*.json"))
		for _, f := range files {
			var info struct {
				Session string `json:"session"`
				PID     int    `json:"pid"`
			}
			if data, err := os.ReadFile(f); err == nil && json.Unmarshal(data, &info) == nil && strings.HasPrefix(info.Session, id) {
				return info.PID
			}
		}
	}
	e.t.Fatalf("no keeper holds session %s", id)
	return 0
}

// startKeptScript starts a detached kept session in pod that waits for
// /tmp/go-on there, then runs then; it returns the session's id once the
// command runs, and the check that it still does.
func (e *backendEnv) startKeptScript(pod, then string) (string, func() bool) {
	e.t.Helper()
	script := `while [ ! -e /tmp/go-on ]; do sleep 1; done; ` + then
	id := strings.TrimSpace(e.mustLazaret(nil, "exec", "-t", "--detach", "e2e", "--", "sh", "-c", script))
	if len(id) != 12 {
		e.t.Fatalf("exec --detach printed %q, not a session id", id)
	}
	running := func() bool { return strings.Contains(e.inPod(pod, "ps -o args 2>/dev/null || ps"), "go-on") }
	for end := time.Now().Add(2 * time.Minute); !running(); time.Sleep(time.Second) {
		if time.Now().After(end) {
			e.t.Fatal("the kept command does not run in the pod")
		}
	}
	return id, running
}
