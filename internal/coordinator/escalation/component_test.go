package escalation

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/insandbox/escclient"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

func testAnchor(t *testing.T) *domain.Anchor {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	os.MkdirAll(ws, 0o755)
	a, err := domain.New("claude", ws, filepath.Join(base, "data"), filepath.Join(base, "run"), filepath.Join(base, "sockets"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LAZARET_ESCALATE", "/bin/true")
	t.Setenv("LAZARET_ESCALATE_GO", "/bin/echo")
	return a
}

func TestComponentPrepareAndClose(t *testing.T) {
	a := testAnchor(t)
	c := NewComponent(ComponentOptions{Anchor: a})
	spec := &podman.ContainerSpec{Env: map[string]string{"PATH": "/usr/bin:/bin"}}
	if err := c.Prepare(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	want := map[string]podman.Mount{
		SandboxTLSDir:    {Type: "bind", Source: a.TLSDir(), Target: SandboxTLSDir, ReadOnly: true},
		SandboxSocket:    {Type: "bind", Source: a.EscalationSocket(), Target: SandboxSocket},
		SandboxClient:    {Type: "bind", Source: "/bin/true", Target: SandboxClient, ReadOnly: true},
		SandboxGoClient:  {Type: "bind", Source: "/bin/echo", Target: SandboxGoClient, ReadOnly: true},
		SandboxBrokerDir: {Type: "tmpfs", Target: SandboxBrokerDir},
		// The isolated sessions' own directory (read-only here) and
		// the pids the CLI signals.
		escprompt.SandboxSessionDir: {Type: "tmpfs", Target: escprompt.SandboxSessionDir, ReadOnly: true},
		escprompt.SandboxPidDir:     {Type: "tmpfs", Target: escprompt.SandboxPidDir},
	}
	for _, m := range spec.Mounts {
		w, ok := want[m.Target]
		if !ok || w.Source != m.Source || w.ReadOnly != m.ReadOnly || w.Type != m.Type {
			t.Errorf("mount %+v, want %+v", m, w)
		}
		delete(want, m.Target)
	}
	if len(want) != 0 {
		t.Errorf("missing mounts %v", want)
	}
	if spec.Env["PATH"] != "/usr/bin:/bin:/run/lazaret/bin" {
		t.Errorf("PATH %q", spec.Env["PATH"])
	}
	for path, mode := range map[string]os.FileMode{a.SocketDir: 0o700, a.TLSDir(): 0o700, a.EscalationSocket(): 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v (%v)", path, fi.Mode().Perm(), mode, err)
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a.TLSDir(), a.EscalationSocket()} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind", p)
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal("second Close:", err)
	}
}

func TestComponentStaleSocketAndPlantedFile(t *testing.T) {
	a := testAnchor(t)
	c := NewComponent(ComponentOptions{Anchor: a})
	if err := c.Prepare(context.Background(), &podman.ContainerSpec{}); err != nil {
		t.Fatal(err)
	}
	// A killed coordinator leaves its socket: the next one replaces it.
	c.mu.Lock()
	c.ln.Close()
	c.mu.Unlock()
	c2 := NewComponent(ComponentOptions{Anchor: a})
	if err := c2.Prepare(context.Background(), &podman.ContainerSpec{}); err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	c2.Close(context.Background())
	c.Close(context.Background())
	// Anything else at the socket path is refused, not removed.
	if err := os.WriteFile(a.EscalationSocket(), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	c3 := NewComponent(ComponentOptions{Anchor: a})
	err := c3.Prepare(context.Background(), &podman.ContainerSpec{})
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("planted file: %v", err)
	}
	c3.Close(context.Background())
	if b, _ := os.ReadFile(a.EscalationSocket()); string(b) != "x" {
		t.Fatal("planted file removed")
	}
}

func TestComponentDisabled(t *testing.T) {
	a := testAnchor(t)
	c := NewComponent(ComponentOptions{Anchor: a, Disabled: true})
	spec := &podman.ContainerSpec{}
	if err := c.Prepare(context.Background(), spec); err != nil || len(spec.Mounts) != 0 || spec.Env != nil {
		t.Fatalf("disabled component changed the spec: %+v %v", spec, err)
	}
	if _, err := os.Stat(a.TLSDir()); !os.IsNotExist(err) {
		t.Fatal("disabled component wrote a TLS dir")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The broker's socket and verb are the ones the client and front end use.
func TestBrokerConstants(t *testing.T) {
	if SandboxBrokerSocket != escclient.DefaultBrokerSocket || brokerVerb != escclient.BrokerVerb || SandboxClient+"-go" != SandboxGoClient {
		t.Fatal("broker constants differ between the component and the client")
	}
}

func TestFindGoClientBesideFrontEnd(t *testing.T) {
	dir := t.TempDir()
	fe := filepath.Join(dir, "lazaret-escalate")
	goc := filepath.Join(dir, "lazaret-escalate-go")
	for _, p := range []string{fe, goc} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("LAZARET_ESCALATE_GO", "")
	t.Setenv("PATH", t.TempDir())
	if got, err := findGoClient(fe); err != nil || got != goc {
		t.Fatalf("findGoClient = %q, %v", got, err)
	}
	os.Remove(goc)
	if _, err := findGoClient(fe); err == nil {
		t.Fatal("a missing Go client was found")
	}
}
