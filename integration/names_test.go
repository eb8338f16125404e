//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// TestNames: profiles whose names look like another resource's (net was
// the network sidecar's own container name, lazaret-net-<hash>) start and
// run, back to back in new workspaces, and the sidecar each leaves is
// named so that no profile's container can be (issue 40 item 12; before
// the fix 3 of 4 `exec` of profile net failed).
func TestNames(t *testing.T) {
	e := NewEnv(t)
	var body strings.Builder
	profiles := []string{"net", "net", "net", "net", "spare", "gate", "a_b-c"}
	// persist = "workspace": with the profile's shared State Anchor a
	// start in another workspace right after `exec` returned is refused
	// while the previous coordinator's teardown still holds the profile
	// lock (statestore.LockProfile: "profile net's persistent dirs are
	// used by ... which is running"), a separate matter from names.
	for _, p := range []string{"net", "spare", "gate", "a_b-c"} {
		body.WriteString("[profiles." + p + "]\nimage = \"localhost/lazaret-default:latest\"\ngit_mode = \"direct\"\npersist = \"workspace\"\n")
	}
	e.WriteConfig(body.String())
	for i, p := range profiles {
		ws := filepath.Join(e.Root, "ws-"+p+"-"+string(rune('a'+i)))
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		e.Workspace = ws
		r := e.Run("exec", p, "--", "true")
		if r.Code != 0 {
			t.Fatalf("exec %d of profile %s: exit %d\nstderr: %s", i+1, p, r.Code, r.Stderr)
		}
		canon, err := domain.Canonical(ws)
		if err != nil {
			t.Fatal(err)
		}
		a := &domain.Anchor{Profile: p, Hash: domain.Hash(p, canon)}
		out, err := Podman(t, "ps", "-a", "--filter", "label="+domain.LabelKey+"="+a.Hash, "--format", "{{.Names}}")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range strings.Fields(out) {
			if name == a.Container() {
				continue // still being removed
			}
			if name != a.Sidecar() || !strings.HasPrefix(name, domain.SidecarPrefix) {
				t.Errorf("profile %s: a container of the domain is named %s (sidecar %s, agent %s)", p, name, a.Sidecar(), a.Container())
			}
		}
	}
}
