package kubecli

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore"
)

// The cluster's exec reads its command line as the local one does
// (execargs): a first word naming a configured profile is the profile,
// without "--" too; errors are usage errors.
func TestExecProfileWithoutDash(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfgPath, []byte("[profiles.dev]\nimage = \"localhost/lazaret-default\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &globals{configPath: cfgPath}
	cmd := &cobra.Command{}
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	profile, command, err := g.splitProfile(cmd, []string{"dev", "ls", "-la"})
	if err != nil || profile != "dev" || !slices.Equal(command, []string{"ls", "-la"}) {
		t.Errorf("exec dev ls -la = %q %q %v", profile, command, err)
	}
	profile, command, err = g.splitProfile(cmd, []string{"prod", "ls"})
	if err != nil || profile != "" || !slices.Equal(command, []string{"prod", "ls"}) {
		t.Errorf("exec prod ls (no such profile) = %q %q %v", profile, command, err)
	}
	var ue clicore.UsageError
	if _, _, err := g.splitProfile(newExecCmd(g), []string{"dev", "-q", "ls"}); !errors.As(err, &ue) {
		t.Errorf("exec dev -q ls: %v, want a usage error", err)
	}
}
