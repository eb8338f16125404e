package gitsentry

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

// Only user.name and user.email of the global config go to the sandbox,
// whatever the repository sets itself (the sandbox reads that live, and
// it wins over the system config there as on the host); nothing
// unprintable goes.
func TestGlobalIdentity(t *testing.T) {
	ctx := context.Background()
	g := &hostgit.Git{}
	home := t.TempDir()
	t.Setenv("HOME", home)
	global := "[user]\n\tname = Global Name\n\temail = global@example.com\n[credential]\n\thelper = store\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(global), 0o600); err != nil {
		t.Fatal(err)
	}
	r := gittest.NewRepo(t)
	want := []string{"user.name", "Global Name", "user.email", "global@example.com"}
	if got := GlobalIdentity(ctx, g, r); !slices.Equal(got, want) {
		t.Errorf("global identity = %q, want %q", got, want)
	}
	gittest.Git(t, r, "config", "user.name", "Repo Name")
	if got := GlobalIdentity(ctx, g, r); !slices.Equal(got, want) {
		t.Errorf("with the repository's own user.name = %q, want %q", got, want)
	}
	global = "[user]\n\tname = Evil\x1b[2JName\n\temail = global@example.com\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(global), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := GlobalIdentity(ctx, g, r), []string{"user.email", "global@example.com"}; !slices.Equal(got, want) {
		t.Errorf("identity with an escape = %q, want %q", got, want)
	}
	if err := os.Remove(filepath.Join(home, ".gitconfig")); err != nil {
		t.Fatal(err)
	}
	if got := GlobalIdentity(ctx, g, r); len(got) != 0 {
		t.Errorf("no global identity = %q", got)
	}
}

// The system config lazaret writes reads back as the same values in git.
func TestSystemConfigQuoting(t *testing.T) {
	name := `Ada "the \ Countess" Lovelace; [x] # not a comment`
	path := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(path, []byte(systemConfig([]string{"user.name", name, "user.email", "ada@example.com"})), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, t.TempDir(), "config", "--file", path, "user.name"); got != name {
		t.Errorf("user.name reads back as %q, want %q", got, name)
	}
	if got := gittest.Git(t, t.TempDir(), "config", "--file", path, "user.email"); got != "ada@example.com" {
		t.Errorf("user.email reads back as %q", got)
	}
}
