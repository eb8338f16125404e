//go:build integration

package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/locate"
)

// TestConfigDomainAsUser checks, as the unprivileged user with the real
// XDG_RUNTIME_DIR, that a config with a profile passes `config check` and
// that `lazaret domain` gives the sha256 anchor of the canonical workspace
// (also through a symlink) and creates a private runtime dir.
func TestConfigDomainAsUser(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("[profiles.claude]\nimage = \"localhost/lazaret-default:latest\"\n")
	if out := e.MustRun("config", "check"); !strings.HasPrefix(out, "ok: "+e.Config) {
		t.Fatalf("config check: %q", out)
	}
	var got struct {
		Workspace string            `json:"workspace"`
		Hash      string            `json:"hash"`
		Resources map[string]string `json:"resources"`
	}
	if err := json.Unmarshal([]byte(e.MustRun("domain", "--profile", "claude", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	ws, err := filepath.EvalSymlinks(e.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("claude:" + ws))
	if want := hex.EncodeToString(sum[:])[:12]; got.Hash != want || got.Workspace != ws {
		t.Fatalf("domain = %s %s, want %s %s", got.Hash, got.Workspace, want, ws)
	}
	rd := got.Resources["runtime_dir"]
	if want := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "lazaret"); rd != want {
		t.Fatalf("runtime_dir = %q, want %q", rd, want)
	}
	fi, err := os.Stat(rd)
	if err != nil || fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Getuid() {
		t.Fatalf("runtime dir %s: %v %v", rd, fi, err)
	}

	link := filepath.Join(e.Root, "wslink")
	if err := os.Symlink(e.Workspace, link); err != nil {
		t.Fatal(err)
	}
	e.Workspace = link
	var viaLink struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(e.MustRun("domain", "--profile", "claude", "--json")), &viaLink); err != nil {
		t.Fatal(err)
	}
	if viaLink.Hash != got.Hash {
		t.Fatalf("through a symlink: %s, want %s", viaLink.Hash, got.Hash)
	}
}

// TestConfigRefusesVolumeSymlinkToRoot: a volume host that is a symlink to
// / is refused by the configuration (exit 5). Positive control: handed to
// podman as it is, that same path really exposes the host's root.
func TestConfigRefusesVolumeSymlinkToRoot(t *testing.T) {
	e := NewEnv(t)
	link := filepath.Join(e.Root, "innocent")
	if err := os.Symlink("/", link); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(e.Root, "marker-"+time.Now().Format("150405.000000000"))
	if err := os.WriteFile(marker, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Positive control: without the check, the mount shows the host's
	// files (the marker, reached from / through the link).
	runsc, err := locate.Find(locate.Runsc)
	if err != nil {
		t.Fatal(err)
	}
	name := "lazaret-config-ctl-" + filepath.Base(e.Root)
	out, err := Podman(t, "run", "--rm", "--name", name, "--network", "none",
		"--runtime", runsc, "--runtime-flag", "ignore-cgroups",
		"--mount", "type=bind,source="+link+",destination=/host,readonly=true",
		"localhost/lazaret-default:latest", "cat", "/host"+marker)
	if err != nil || out != "host" {
		t.Fatalf("positive control: podman did not expose the host root through the link: %q %v", out, err)
	}

	e.WriteConfig("[profiles.claude]\nimage = \"localhost/lazaret-default:latest\"\nvolumes = [{ host = \"" + link + "\", container = \"/host\", mode = \"ro\" }]\n")
	r := e.Run("config", "check")
	if r.Code != 5 || !strings.Contains(r.Stderr, "profiles.claude.volumes[0].host: is the host root /") {
		t.Fatalf("config check: exit %d, stderr %q", r.Code, r.Stderr)
	}
	if lines := strings.Count(strings.TrimSpace(r.Stderr), "\n"); lines != 1 { // the error and its hint
		t.Fatalf("want one error line and one hint, got %q", r.Stderr)
	}
}
