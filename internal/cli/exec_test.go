package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/cobra"
)

// splitProfile through the real exec command's flag parsing: the profile,
// the command and -t, wherever lazaret allows them.
func TestExecArgs(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfgPath, []byte("[profiles.dev]\nimage = \"localhost/lazaret-default\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args      []string
		profile   string
		command   []string
		tty       bool
		wantUsage bool
	}{
		{args: []string{"true"}, command: []string{"true"}},
		{args: []string{"--", "ls", "-la"}, command: []string{"ls", "-la"}},
		{args: []string{"dev", "--", "ls"}, profile: "dev", command: []string{"ls"}},
		{args: []string{"dev", "ls", "-la"}, profile: "dev", command: []string{"ls", "-la"}},
		{args: []string{"-t", "dev", "--", "vim"}, profile: "dev", command: []string{"vim"}, tty: true},
		{args: []string{"dev", "-t", "--", "vim"}, profile: "dev", command: []string{"vim"}, tty: true},
		{args: []string{"dev", "-t", "vim", "-x"}, profile: "dev", command: []string{"vim", "-x"}, tty: true},
		{args: []string{"dev", "--tty", "--", "sh", "-c", "exit 3"}, profile: "dev", command: []string{"sh", "-c", "exit 3"}, tty: true},
		// A word that is not a configured profile is the command, flags and all.
		{args: []string{"git", "-c", "x=y", "--", "status"}, command: []string{"git", "-c", "x=y", "--", "status"}},
		{args: []string{"dev", "-q", "--", "ls"}, wantUsage: true},
		{args: []string{"dev", "-t", "--"}, wantUsage: true},
		{args: []string{"dev", "--"}, wantUsage: true},
	} {
		g := &globalOptions{io: IO{In: nil, Out: io.Discard, ErrOut: io.Discard}, configPath: cfgPath}
		cmd := newExecCmd(g)
		var profile string
		var command []string
		var tty bool
		cmd.RunE = func(c *cobra.Command, args []string) error {
			var err error
			profile, command, err = splitProfile(g, c, args)
			tty, _ = c.Flags().GetBool("tty")
			return err
		}
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		var ue usageError
		if tc.wantUsage {
			if !errors.As(err, &ue) {
				t.Errorf("exec %q: %v, want a usage error", tc.args, err)
			}
			continue
		}
		if err != nil || profile != tc.profile || !slices.Equal(command, tc.command) || tty != tc.tty {
			t.Errorf("exec %q = profile %q, command %q, tty %v, %v; want %q, %q, %v", tc.args, profile, command, tty, err, tc.profile, tc.command, tc.tty)
		}
	}
}
