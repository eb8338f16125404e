package execargs

import (
	"io"
	"slices"
	"testing"

	"github.com/spf13/cobra"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		profile   string
		command   []string
		tty       bool
		wantError bool
	}{
		{args: []string{"true"}, command: []string{"true"}},
		{args: []string{"--", "ls", "-la"}, command: []string{"ls", "-la"}},
		{args: []string{"dev", "--", "ls"}, profile: "dev", command: []string{"ls"}},
		// Any word before "--" is taken as the profile (the caller checks it).
		{args: []string{"nosuch", "--", "ls"}, profile: "nosuch", command: []string{"ls"}},
		{args: []string{"dev", "ls", "-la"}, profile: "dev", command: []string{"ls", "-la"}},
		{args: []string{"-t", "dev", "--", "vim"}, profile: "dev", command: []string{"vim"}, tty: true},
		{args: []string{"dev", "-t", "--", "vim"}, profile: "dev", command: []string{"vim"}, tty: true},
		{args: []string{"dev", "-t", "vim", "-x"}, profile: "dev", command: []string{"vim", "-x"}, tty: true},
		// A word that is not a known profile is the command, flags and all.
		{args: []string{"git", "-c", "x=y", "--", "status"}, command: []string{"git", "-c", "x=y", "--", "status"}},
		{args: []string{"dev"}, command: []string{"dev"}},
		{args: []string{"dev", "-q", "--", "ls"}, wantError: true},
		{args: []string{"dev", "-t", "--"}, wantError: true},
		{args: []string{"dev", "--"}, wantError: true},
		{args: []string{"--"}, wantError: true},
	} {
		var profile string
		var command []string
		var tty bool
		cmd := &cobra.Command{
			Use: "exec",
			RunE: func(c *cobra.Command, args []string) error {
				var err error
				profile, command, err = Split(c, args, func(name string) bool { return name == "dev" })
				return err
			},
		}
		cmd.Flags().SetInterspersed(false)
		cmd.Flags().BoolVarP(&tty, "tty", "t", false, "")
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if tc.wantError {
			if err == nil {
				t.Errorf("exec %q: no error", tc.args)
			}
			continue
		}
		if err != nil || profile != tc.profile || !slices.Equal(command, tc.command) || tty != tc.tty {
			t.Errorf("exec %q = profile %q, command %q, tty %v, %v; want %q, %q, %v", tc.args, profile, command, tty, err, tc.profile, tc.command, tc.tty)
		}
	}
}
