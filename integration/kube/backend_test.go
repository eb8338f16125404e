//go:build kube

// The Kubernetes backend end to end: lazaret --backend kubernetes (which
// execs lazaret-kube) against the tier's one-node cluster with gVisor and
// agent-sandbox, started by scripts/kube-test (the environment names it:
// LAZARET_KUBECONFIG, LAZARET_KUBECTL, LAZARET_KUBE_TEST_IMAGE,
// LAZARET_KUBE_RUNTIME_CLASS). Names here carry a "backend" prefix so this
// file lives beside the tier's own helpers.
package kube_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
)

// backendEnv is one test's binaries, configuration, namespace and
// workspace.
type backendEnv struct {
	t         *testing.T
	bin       string // lazaret, with lazaret-kube beside it
	cfg       string
	ws        string
	namespace string
	kubectl   string
	kubecfg   string
}

var backendBinDir string

// backendBuild builds lazaret and lazaret-kube once per test binary.
func backendBuild(t *testing.T) string {
	t.Helper()
	if backendBinDir != "" {
		return backendBinDir
	}
	dir, err := os.MkdirTemp("", "lazaret-kube-e2e-bin-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/lazaret", "./cmd/lazaret-kube")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	backendBinDir = dir
	return dir
}

func newBackendEnv(t *testing.T, extraCluster string) *backendEnv {
	t.Helper()
	kubecfg, kubectl, image := os.Getenv("LAZARET_KUBECONFIG"), os.Getenv("LAZARET_KUBECTL"), os.Getenv("LAZARET_KUBE_TEST_IMAGE")
	if kubecfg == "" || kubectl == "" || image == "" {
		t.Fatal("LAZARET_KUBECONFIG, LAZARET_KUBECTL and LAZARET_KUBE_TEST_IMAGE are not set: run through scripts/kube-test")
	}
	rc := os.Getenv("LAZARET_KUBE_RUNTIME_CLASS")
	if rc == "" {
		rc = "gvisor"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	e := &backendEnv{t: t, bin: filepath.Join(backendBuild(t), "lazaret"), ws: t.TempDir(), namespace: "lazaret-e2e-" + hex.EncodeToString(b[:]),
		kubectl: kubectl, kubecfg: kubecfg}
	root := t.TempDir()
	e.cfg = filepath.Join(root, "config.toml")
	doc := fmt.Sprintf(`data_root = %q
[cluster]
kubeconfig = %q
namespace = %q
runtime_class = %q
image_pull_policy = "Never"
netd_image = %q
dns = [%q]
%s
[profiles.e2e]
image = %q
`, filepath.Join(root, "data"), kubecfg, e.namespace, rc, netdImage(t, func() string { return e.kube(nodeImagesQuery...) }), backendUpstream(t), extraCluster, image)
	if err := os.WriteFile(e.cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	e.kube("create", "namespace", e.namespace)
	t.Cleanup(func() {
		// The claims first (lazaret's own stop), then the namespace.
		_, _, _ = e.lazaret(nil, "stop", "--all", "--purge")
		e.kube("delete", "namespace", e.namespace, "--wait=true", "--timeout=120s")
	})
	return e
}

// kube runs kubectl and returns its output; a failure fails the test.
func (e *backendEnv) kube(args ...string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.kubectl, append([]string{"--kubeconfig", e.kubecfg}, args...)...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// lazaret runs `lazaret --backend kubernetes ARGS` with stdin and returns
// stdout, stderr and the exit code.
func (e *backendEnv) lazaret(stdin []byte, args ...string) (string, string, int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, append([]string{"--backend", "kubernetes", "--config", e.cfg, "--workspace", e.ws}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("running lazaret: %v", err)
	}
	return out.String(), errb.String(), code
}

func (e *backendEnv) mustLazaret(stdin []byte, args ...string) string {
	e.t.Helper()
	out, errOut, code := e.lazaret(stdin, args...)
	if code != 0 {
		e.t.Fatalf("lazaret %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// TestBackendExecUnderGVisor: exec claims a sandbox whose pod runs under
// gVisor (dmesg shows gVisor's boot lines; the runtime class is the
// configured one), passes stdin, and keeps the local exit codes.
func TestBackendExecUnderGVisor(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true")
	if out := e.mustLazaret(nil, "exec", "e2e", "--", "dmesg"); !strings.Contains(out, "gVisor") {
		t.Errorf("dmesg in the sandbox does not show gVisor:\n%s", out)
	}
	if out := e.mustLazaret(nil, "exec", "e2e", "--", "cat", "/proc/version"); !strings.Contains(out, "Linux version") {
		t.Errorf("/proc/version: %q", out)
	}
	if out := e.mustLazaret([]byte("through the API server\n"), "exec", "e2e", "--", "cat"); out != "through the API server\n" {
		t.Errorf("stdin: %q", out)
	}
	for _, c := range []struct {
		cmd  []string
		want int
	}{
		{[]string{"sh", "-c", "exit 7"}, 7},
		{[]string{"/nonexistent-command"}, 127},
		{[]string{"/bin"}, 126},
	} {
		if _, errOut, code := e.lazaret(nil, append([]string{"exec", "e2e", "--"}, c.cmd...)...); code != c.want {
			t.Errorf("%v: exit %d, want %d; %s", c.cmd, code, c.want, errOut)
		}
	}
	rc := os.Getenv("LAZARET_KUBE_RUNTIME_CLASS")
	if rc == "" {
		rc = "gvisor"
	}
	out := e.mustLazaret(nil, "status", "e2e")
	if !strings.Contains(out, "Ready") || !strings.Contains(out, "runtime class:  "+rc) {
		t.Errorf("status:\n%s", out)
	}
	if got := strings.TrimSpace(e.kube("get", "pods", "-n", e.namespace, "-o", "jsonpath={.items[*].spec.runtimeClassName}")); got != rc {
		t.Errorf("pods' runtime classes %q, want %q", got, rc)
	}
}

// TestBackendShellPTY: a shell through the API server under a terminal:
// the prompt, an answer, the terminal's size, and the exit code of `exit`.
func TestBackendShellPTY(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true")
	e.mustLazaret(nil, "exec", "e2e", "--", "true") // claim first: the PTY test then waits for nothing
	tm := ptytest.Open(t)
	cmd := exec.Command(e.bin, "--backend", "kubernetes", "--config", e.cfg, "--workspace", e.ws, "shell", "e2e")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tm.TTY, tm.TTY, tm.TTY
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	_, _ = tm.Ptmx.Write([]byte("echo answer=$((6*7)); busybox stty size\r"))
	tm.WaitFor(t, "answer=42")
	tm.WaitFor(t, "40 120")
	_, _ = tm.Ptmx.Write([]byte("exit 3\r"))
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 3 {
			t.Errorf("shell ended with %v, want exit 3; terminal:\n%s", err, tm.Output())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("shell did not end; terminal:\n%s", tm.Output())
	}
}

// TestBackendStopLeavesNothing: ps lists the claim, stop deletes it and
// the controller removes its Sandbox and pod; --purge the template.
func TestBackendStopLeavesNothing(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true")
	e.mustLazaret(nil, "exec", "e2e", "--", "true")
	if out := e.mustLazaret(nil, "ps"); !strings.Contains(out, "e2e") || !strings.Contains(out, "Ready") {
		t.Errorf("ps:\n%s", out)
	}
	e.mustLazaret(nil, "stop", "e2e")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		left := strings.TrimSpace(e.kube("get", "sandboxclaims,sandboxes,pods", "-n", e.namespace, "-o", "name"))
		if left == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after stop:\n%s", left)
		}
		time.Sleep(time.Second)
	}
	e.mustLazaret(nil, "stop", "--all", "--purge")
	if left := strings.TrimSpace(e.kube("get", "sandboxtemplates,sandboxwarmpools", "-n", e.namespace, "-o", "name")); left != "" {
		t.Errorf("left after --purge:\n%s", left)
	}
}

// TestBackendEnforcementRefusal: without the override, a profile that
// limits egress starts only if the probe shows enforcement. On the tier's
// cluster (no policy agent can run on its kernel) the probe's answer is
// not "enforced", and the start is refused with exit 5 and no claim. If
// the cluster does enforce, the start must succeed instead.
func TestBackendEnforcementRefusal(t *testing.T) {
	e := newBackendEnv(t, "")
	out, _, _ := e.lazaret(nil, "doctor", "e2e")
	t.Logf("doctor:\n%s", out)
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "NetworkPolicy:") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("doctor says nothing about NetworkPolicy:\n%s", out)
	}
	_, errOut, code := e.lazaret(nil, "exec", "e2e", "--", "true")
	if strings.Contains(line, ": enforced:") {
		if code != 0 {
			t.Fatalf("enforced cluster, start failed: %d %s", code, errOut)
		}
		return
	}
	if code != 5 || !strings.Contains(errOut, "--allow-unenforced-egress") {
		t.Errorf("exit %d, want 5 with the override named; %s", code, errOut)
	}
	if left := strings.TrimSpace(e.kube("get", "sandboxclaims", "-n", e.namespace, "-o", "name")); left != "" {
		t.Errorf("a refused start left %s", left)
	}
	// The positive control: the same start with the override runs.
	if _, errOut, code := e.lazaret(nil, "exec", "--allow-unenforced-egress", "e2e", "--", "true"); code != 0 {
		t.Fatalf("with --allow-unenforced-egress: exit %d %s", code, errOut)
	}
	checkGeneratedPolicy(t, e)
}
