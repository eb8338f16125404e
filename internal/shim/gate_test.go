package shim

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/startgate"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

func TestCreateBundle(t *testing.T) {
	for _, c := range []struct {
		args   []string
		bundle string
		create bool
	}{
		{[]string{"runsc", "--root", "/r", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/p", "id"}, "/b", true},
		{[]string{"runsc", "create", "--bundle=/b2", "id"}, "/b2", true},
		{[]string{"runsc", "create", "-bundle", "/b3", "id"}, "/b3", true},
		{[]string{"runsc", "create", "id"}, ".", true},
		{[]string{"runsc", "--root", "/r", "start", "id"}, "", false},
		{[]string{"runsc", "--network", "create", "start", "id"}, "", false},
		{[]string{"runsc", "exec", "--bundle", "/b", "id"}, "", false},
		{[]string{"runsc"}, "", false},
	} {
		b, ok := createBundle(c.args)
		if b != c.bundle || ok != c.create {
			t.Errorf("createBundle(%q) = %q, %v; want %q, %v", c.args, b, ok, c.bundle, c.create)
		}
	}
}

const shimChildEnv = "LAZARET_SHIM_TEST_CHILD"

// TestShimChild is the shim run as podman runs it (a process of its own,
// since it execs runsc); the other tests start it.
func TestShimChild(t *testing.T) {
	if os.Getenv(shimChildEnv) == "" {
		t.Skip("helper process")
	}
	os.Exit(Main(append([]string{locate.Shim}, strings.Fields(os.Getenv(shimChildEnv))...)))
}

// shimRun starts the shim on argv with a fake runsc that records that it
// ran; it returns the command and the record's path.
func shimRun(t *testing.T, argv string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	fake := filepath.Join(dir, "runsc")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$@\" > "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestShimChild$")
	cmd.Env = append(os.Environ(), shimChildEnv+"="+argv, "LAZARET_RUNSC="+fake)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stderr, ran
}

func bundleWithGate(t *testing.T, gate string) string {
	t.Helper()
	b := t.TempDir()
	spec := `{"ociVersion":"1.0.2","annotations":{}}`
	if gate != "" {
		spec = `{"ociVersion":"1.0.2","annotations":{"` + startgate.Annotation + `":"` + gate + `"}}`
	}
	if err := os.WriteFile(filepath.Join(b, "config.json"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

func gateFor(t *testing.T) *startgate.Gate {
	t.Helper()
	dir, err := os.MkdirTemp("", "shimgate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	g, err := startgate.Listen(filepath.Join(dir, "g.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func TestShimHoldsCreateAtTheGate(t *testing.T) {
	g := gateFor(t)
	cmd, stderr, ran := shimRun(t, "--root /r create --bundle "+bundleWithGate(t, g.Path())+" --pid-file /p cid")
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("runsc create ran before the gate opened")
	}
	g.Open(nil)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("shim: %v (%s)", err, stderr)
	}
	got, err := os.ReadFile(ran)
	if err != nil || !strings.Contains(string(got), "create --bundle") {
		t.Fatalf("runsc did not run create after the gate opened: %q %v", got, err)
	}
}

func TestShimFailsCreateWhenTheGateRefuses(t *testing.T) {
	g := gateFor(t)
	cmd, stderr, ran := shimRun(t, "create --bundle "+bundleWithGate(t, g.Path())+" cid")
	g.Open(errors.New("stateanchor: mounting the overlay on /usr: boom"))
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitSetup {
		t.Fatalf("shim exit: %v (%s)", err, stderr)
	}
	if !strings.Contains(stderr.String(), "boom") {
		t.Errorf("stderr does not name the cause: %q", stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("runsc create ran although the gate refused")
	}
	// Control: with the gate gone (a dead coordinator) it fails too.
	g.Close()
	cmd, stderr, ran = shimRun(t, "create --bundle "+bundleWithGate(t, g.Path())+" cid")
	if err := cmd.Wait(); err == nil {
		t.Fatalf("shim ran create with no coordinator behind the gate (%s)", stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("runsc create ran with no gate")
	}
}

func TestShimWithoutAGateRunsAtOnce(t *testing.T) {
	for _, argv := range []string{
		"create --bundle " + bundleWithGate(t, "") + " cid", // not lazaret's agent: no gate
		"start cid", // only create waits
	} {
		cmd, stderr, ran := shimRun(t, argv)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v (%s)", argv, err, stderr)
		}
		if _, err := os.Stat(ran); err != nil {
			t.Errorf("%s: runsc did not run", argv)
		}
	}
	// An unreadable spec cannot tell whether to wait: refused.
	cmd, _, ran := shimRun(t, "create --bundle "+t.TempDir()+" cid")
	if err := cmd.Wait(); err == nil {
		t.Error("create with no config.json ran")
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("runsc ran without a readable spec")
	}
}
