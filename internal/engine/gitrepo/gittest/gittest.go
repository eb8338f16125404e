// Package gittest holds the helpers of the tests that run real host git on
// repositories in temporary directories (internal/engine/gitrepo, internal/cli/review,
// internal/coordinator/gitsentry). Tests only.
package gittest

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// Main gives host git a HOME of its own with a committer identity, so the
// tests neither depend on nor read the machine's global git configuration
// (a fresh CI machine has none, and merges need one), then runs m.
func Main(m *testing.M) {
	home, err := os.MkdirTemp("", "gitsentry-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg := "[user]\n\tname = Lazaret Test\n\temail = test@lazaret.invalid\n[init]\n\tdefaultBranch = main\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(cfg), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("HOME", home)
	os.Unsetenv("XDG_CONFIG_HOME")
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

// Git runs the test's own git (not lazaret's hardened one) in dir.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=T", "-c", "user.email=t@example.com",
		"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// Write writes an executable file at path, making its directories.
func Write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// NewRepo returns a repository with one commit of a.txt on main.
func NewRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(dir, 0o755)
	Git(t, dir, "init", "-q")
	Write(t, filepath.Join(dir, "a.txt"), "one\ntwo\nthree\n")
	Git(t, dir, "add", ".")
	Git(t, dir, "commit", "-q", "-m", "first")
	return dir
}

// Anchor returns the domain of profile in workspace ws, with its root made.
func Anchor(t testing.TB, ws, profile string) *domain.Anchor {
	t.Helper()
	base := t.TempDir()
	a, err := domain.New(profile, ws, filepath.Join(base, "data"), filepath.Join(base, "run"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.EnsurePrivateDir(a.Root()); err != nil {
		t.Fatal(err)
	}
	return a
}

// snapshot is HEAD, index, every ref and the working tree of a repository.
func Snapshot(t testing.TB, ws string) string {
	t.Helper()
	var b strings.Builder
	gitDir := Git(t, ws, "rev-parse", "--absolute-git-dir")
	for _, f := range []string{"HEAD", "index"} {
		data, _ := os.ReadFile(filepath.Join(gitDir, f))
		fmt.Fprintf(&b, "%s %x\n", f, sha256.Sum256(data))
	}
	for _, l := range strings.Split(Git(t, ws, "for-each-ref", "--format=%(objectname) %(refname)"), "\n") {
		if !strings.Contains(l, "lazaret/") {
			b.WriteString(l + "\n")
		}
	}
	var files []string
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == ".git" {
			return filepath.SkipDir
		}
		switch {
		case err != nil || d.IsDir():
		case d.Type().IsRegular():
			data, _ := os.ReadFile(p)
			files = append(files, fmt.Sprintf("%s %x", p, sha256.Sum256(data)))
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			files = append(files, fmt.Sprintf("%s -> %q", p, target))
		default: // a FIFO or socket: never opened
			files = append(files, fmt.Sprintf("%s %v", p, d.Type()))
		}
		return nil
	})
	sort.Strings(files)
	return b.String() + strings.Join(files, "\n")
}
