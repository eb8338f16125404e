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
	if lines := strings.Count(strings.TrimSpace(r.Stderr), "\n"); lines != 2 { // the error, the count and the hint
		t.Fatalf("want one error line, the count and one hint, got %q", r.Stderr)
	}
}

// TestConfigVolumesReachTheSandbox: configured volumes are mounted as the
// configuration says: a token-expanded read-write one whose writes reach
// {profile_dir}/home on the host, and a read-only one that refuses writes.
func TestConfigVolumesReachTheSandbox(t *testing.T) {
	e := NewEnv(t)
	ro := filepath.Join(e.Root, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "f"), []byte("from-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.WriteConfig("[profiles.claude]\nimage = \"localhost/lazaret-default:latest\"\nvolumes = [\n" +
		"  { host = \"{profile_dir}/home\", container = \"/root/h\", mode = \"z\" },\n" +
		"  { host = \"" + ro + "\", container = \"/ro\", mode = \"ro\" },\n]\n")
	r := e.Run("exec", "claude", "--", "sh", "-c", "cat /ro/f; echo w > /root/h/w; if echo x > /ro/g; then echo WROTE; fi")
	if r.Code != 0 || !strings.Contains(r.Stdout, "from-host") || strings.Contains(r.Stdout, "WROTE") || !strings.Contains(r.Stderr, "Read-only file system") {
		t.Fatalf("exec: exit %d\nstdout %q\nstderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(e.DataRoot, "claude", "home", "w")); err != nil || string(b) != "w\n" {
		t.Fatalf("write through the rw volume: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "g")); err == nil {
		t.Fatal("the read-only volume was written")
	}
}

// TestConfigRefusesWorkspaceGitVolume: a volume of {workspace_dir}/.git is
// refused before anything starts (exit 5, no Domain Root created).
// Positive control: mounted by podman as written, the sandbox can write the
// host's .git (here: a hook that host git would run).
func TestConfigRefusesWorkspaceGitVolume(t *testing.T) {
	e := NewEnv(t)
	gitDir := filepath.Join(e.Workspace, ".git", "hooks")
	if err := os.MkdirAll(gitDir, 0o755); err != nil {
		t.Fatal(err)
	}
	runsc, err := locate.Find(locate.Runsc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Podman(t, "run", "--rm", "--name", "lazaret-config-ctl-git-"+filepath.Base(e.Root), "--network", "none",
		"--runtime", runsc, "--runtime-flag", "ignore-cgroups",
		"--mount", "type=bind,source="+filepath.Join(e.Workspace, ".git")+",destination=/g",
		"localhost/lazaret-default:latest", "sh", "-c", "echo planted > /g/hooks/post-checkout")
	if b, rerr := os.ReadFile(filepath.Join(gitDir, "post-checkout")); err != nil || rerr != nil || string(b) != "planted\n" {
		t.Fatalf("positive control: the container could not write the host .git: %v %v %q", err, rerr, b)
	}

	e.WriteConfig("[profiles.claude]\nimage = \"localhost/lazaret-default:latest\"\nvolumes = [{ host = \"{workspace_dir}/.git\", container = \"/g\" }]\n")
	r := e.Run("exec", "claude", "--", "true")
	if r.Code != 5 || !strings.Contains(r.Stderr, "profiles.claude.volumes[0].host: ") || !strings.Contains(r.Stderr, "is the workspace's .git") {
		t.Fatalf("exec: exit %d, stderr %q", r.Code, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(e.DataRoot, "domains")); !os.IsNotExist(err) {
		t.Fatalf("a refused start created %s (stat: %v)", filepath.Join(e.DataRoot, "domains"), err)
	}
}

// TestUnsetEnvOnlyBlocksStart: an env:VAR whose host variable is unset stops
// a sandbox from starting (one line naming the key, nothing left running),
// while commands that start nothing keep working.
func TestUnsetEnvOnlyBlocksStart(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("[profiles.keyed]\nimage = \"localhost/lazaret-default:latest\"\nenv = { API_KEY = \"env:LZ_IT_UNSET_KEY\" }\n")
	r := e.Run("exec", "keyed", "--", "true")
	if r.Code != 4 || !strings.Contains(r.Stderr, "profiles.keyed.env.API_KEY") || strings.Count(r.Stderr, "lazaret: ") != 1 {
		t.Fatalf("exec with an unset env:VAR: exit %d\n%s", r.Code, r.Stderr)
	}
	if out, _ := Podman(t, "ps", "-a", "--filter", "label=lazaret.profile=keyed", "--format", "{{.Names}}"); strings.TrimSpace(out) != "" {
		t.Fatalf("containers left running: %s", out)
	}
	e.MustRun("status")
	e.MustRun("stop", "keyed")
	// Positive control: with the variable set the sandbox starts and sees it.
	e.ExtraEnv = append(e.ExtraEnv, "LZ_IT_UNSET_KEY=k-123")
	if out := e.MustRun("exec", "keyed", "--", "sh", "-c", "echo $API_KEY"); strings.TrimSpace(out) != "k-123" {
		t.Fatalf("API_KEY inside = %q", out)
	}
}
