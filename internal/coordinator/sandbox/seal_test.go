package sandbox

import (
	"path"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
)

// TestSealRunDir: every directory on the way to a mount under RunDir is a
// mount point of its own (a plain directory there could be renamed from
// inside the sandbox), read-only from RunDir down, and parents come
// before their children.
func TestSealRunDir(t *testing.T) {
	spec := &podman.ContainerSpec{Mounts: []podman.Mount{
		{Type: "bind", Source: "/h/ws", Target: "/workspace"},
		{Type: "bind", Source: "/h/esc", Target: "/run/lazaret/bin/lazaret-escalate", ReadOnly: true},
		{Type: "bind", Source: "/h/fsm", Target: "/run/lazaret/gitsentry/lazaret-fsmonitor", ReadOnly: true},
		{Type: "bind", Source: "/h/deep", Target: "/run/lazaret/a/b/c", ReadOnly: true},
		{Type: "tmpfs", Target: "/run/lazaret/escalate-broker"},
	}}
	SealRunDir(spec)
	seen := map[string]int{}
	for i, m := range spec.Mounts {
		seen[m.Target] = i
	}
	for _, d := range []string{"/run", "/run/lock", "/run/lazaret", "/run/lazaret/bin", "/run/lazaret/gitsentry", "/run/lazaret/a", "/run/lazaret/a/b"} {
		if _, ok := seen[d]; !ok {
			t.Errorf("%s is not a mount point: %+v", d, spec.Mounts)
		}
	}
	for _, m := range spec.Mounts {
		for p := path.Dir(m.Target); p != "/"; p = path.Dir(p) {
			if i, ok := seen[p]; ok && i > seen[m.Target] {
				t.Errorf("%s is mounted after %s", p, m.Target)
			}
		}
		if strings.HasPrefix(m.Target, RunDir) && m.Type == "tmpfs" && m.Target != "/run/lazaret/escalate-broker" && !m.ReadOnly {
			t.Errorf("%s is writable", m.Target)
		}
	}
	if m := spec.Mounts[seen["/run"]]; m.ReadOnly || m.Type != "tmpfs" {
		t.Errorf("/run: %+v", m)
	}
	// Control: nothing under RunDir, nothing added.
	plain := &podman.ContainerSpec{Mounts: []podman.Mount{{Type: "bind", Source: "/h/ws", Target: "/workspace"}}}
	SealRunDir(plain)
	if len(plain.Mounts) != 1 {
		t.Errorf("mounts added without anything under %s: %+v", RunDir, plain.Mounts)
	}
}
