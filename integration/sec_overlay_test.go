//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/coordinator/stateanchor"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

// secOverlayPlants plants in the persistent /usr, from inside the
// sandbox, repositories whose config makes host git run a command: a
// nested repository with core.fsmonitor, and a .git FILE pointing at a
// gitdir the agent wrote. Each payload writes its own marker in $MARK (a
// host path, as an agent that knows where it lives would write).
const secOverlayPlants = `set -e
t() { printf 'touch %s/%s; false #' "$MARK" "$1"; }
g() { git -c user.name=A -c user.email=a@x -c core.hooksPath=/dev/null -c core.fsmonitor=false "$@"; }
mkdir -p /usr/local/x && g -C /usr/local/x init -q && echo n > /usr/local/x/f && g -C /usr/local/x add f && g -C /usr/local/x commit -q -m n
g -C /usr/local/x config core.fsmonitor "$(t fsmonitor)"
g init -q /usr/local/gitfile && mv /usr/local/gitfile/.git /usr/local/.gitfile-dir
printf 'gitdir: ../.gitfile-dir\n' > /usr/local/gitfile/.git
g -C /usr/local/gitfile config core.fsmonitor "$(t gitfile)"
`

var secOverlayPlantNames = []string{"fsmonitor", "gitfile"}

// TestSecOverlayHostGitInert: what the agent writes in a persistent dir
// lands in the State Anchor's changes dir on the host; host git run by the
// user in every directory under the domain root and under the profile's
// data dir (walked, and the plants by their paths) runs none of it, while
// the sandbox runs and after it stops, for both persist modes. Control:
// with the overlay root opened (mode 700, the layout before the vault)
// the same walk fires every plant.
func TestSecOverlayHostGitInert(t *testing.T) {
	for _, persist := range []string{config.PersistProfile, config.PersistWorkspace} {
		t.Run(persist, func(t *testing.T) { secOverlayInert(t, persist) })
	}
}

func secOverlayInert(t *testing.T, persist string) {
	s := newSAEnv(t)
	m := filepath.Join(s.env.Root, "markers")
	if err := os.MkdirAll(m, 0o777); err != nil {
		t.Fatal(err)
	}
	comp := stateanchor.New(stateanchor.Options{Anchor: s.anchor, Image: config.DefaultImage, Dirs: []string{"/usr"}, Podman: s.pc, Persist: persist})
	s.start(comp, config.DefaultImage)
	s.sh("MARK=" + m + "\n" + secOverlayPlants)

	st := statestore.Locate(s.anchor, persist)
	changes, _, merged := st.OverlayPaths("/usr")
	byPath := []string{changes, merged, filepath.Join(changes, "local", "x"), filepath.Join(changes, "local", "gitfile"),
		filepath.Join(changes, "local", ".gitfile-dir")}
	if _, err := os.Stat(filepath.Join(changes, "local", "x")); !os.IsPermission(err) {
		t.Errorf("a plant directory is reachable by the user: %v", err)
	}
	walk := func() int {
		return hostGitWalk(t, s.anchor.Root(), byPath...) + hostGitWalk(t, s.anchor.ProfileDir())
	}
	t.Logf("host git ran in %d directories (sandbox running)", walk())
	// The plants are there: the agent reads them back through the mount.
	if out := s.sh("cat /usr/local/gitfile/.git"); out != "gitdir: ../.gitfile-dir\n" {
		t.Fatalf("plant not in the sandbox: %q", out)
	}
	s.stop(comp)
	t.Logf("after the stop, host git ran in %d directories", walk())
	if got := markers(t, m); len(got) > 0 {
		t.Errorf("host git ran agent commands: markers %v", got)
	}
	if fi, err := os.Lstat(st.Root); err != nil || fi.Mode().Perm() != 0 {
		t.Errorf("overlay root %s: %v %v, want mode 000", st.Root, fi.Mode(), err)
	}

	// Control: the same walk with the overlay root opened.
	if err := os.Chmod(st.Root, 0o700); err != nil {
		t.Fatal(err)
	}
	n := walk()
	got := markers(t, m)
	t.Logf("control: host git ran in %d directories; markers %v", n, got)
	for _, p := range secOverlayPlantNames {
		if !slices.Contains(got, p) {
			t.Errorf("control: plant %s did not fire with the overlay root open", p)
		}
	}
	// The next start seals an opened (or pre-vault) root again, and the
	// changes made before are still there.
	comp = stateanchor.New(stateanchor.Options{Anchor: s.anchor, Image: config.DefaultImage, Dirs: []string{"/usr"}, Podman: s.pc, Persist: persist})
	s.start(comp, config.DefaultImage)
	if fi, err := os.Lstat(st.Root); err != nil || fi.Mode().Perm() != 0 {
		t.Errorf("overlay root after a restart: %v %v, want mode 000", fi.Mode(), err)
	}
	if out := s.sh("git -C /usr/local/x log --format=%s -1"); out != "n\n" {
		t.Errorf("changes lost across the seal: %q", out)
	}
	s.stop(comp)
}

// openOverlayRoot runs fn with the State Anchor root at mode 700 (the
// layout before the vault), for tests that look at the changes from the
// host, and seals it again.
func openOverlayRoot(t *testing.T, root string, fn func()) {
	t.Helper()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.Chmod(root, 0) }()
	fn()
}
