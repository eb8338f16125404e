// Package execargs splits `exec [PROFILE] [FLAGS] [--] COMMAND…` the same
// way for the local CLI and lazaret-kube, so a command line means the
// same on both backends.
package execargs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/spf13/cobra"
)

// Split separates the optional PROFILE from the command of cmd's args:
// with "--" everything before it (at most one word) is the profile;
// without, the first word is the profile only if isProfile says it names
// a configured profile and a command follows. cmd's flags must stop at
// the first argument (SetInterspersed(false)), so the command's own flags
// are never lazaret's; exec's own flags written after PROFILE (`exec dev
// -t -- vim`) are parsed here. Every error is a usage error.
func Split(cmd *cobra.Command, args []string, isProfile func(string) bool) (string, []string, error) {
	if cmd.ArgsLenAtDash() == 0 {
		if len(args) == 0 {
			return "", nil, errors.New("exec: no command after --")
		}
		return "", args, nil
	}
	if len(args) >= 2 && args[1] == "--" {
		if len(args) == 2 {
			return "", nil, errors.New("exec: no command after --")
		}
		return args[0], args[2:], nil
	}
	if len(args) > 1 && isProfile(args[0]) {
		command, err := profileFlags(cmd, args[0], args[1:])
		return args[0], command, err
	}
	return "", args, nil
}

// profileFlags parses exec's own flags written after PROFILE: up to the
// first word that is not a flag, or "--". A command after a profile never
// starts with "-".
func profileFlags(cmd *cobra.Command, profile string, rest []string) ([]string, error) {
	if !strings.HasPrefix(rest[0], "-") {
		return rest, nil
	}
	fs := cmd.Flags()
	if err := fs.Parse(rest); err != nil {
		return nil, fmt.Errorf("exec %s: %w", profile, err)
	}
	if len(fs.Args()) == 0 {
		return nil, fmt.Errorf("exec %s: no command", profile)
	}
	return fs.Args(), nil
}

// KnownProfile reports whether name is a valid profile name configured in
// the configuration load returns; a configuration that does not load
// names no profile (the word is then the command).
func KnownProfile(load func() (*config.Config, error)) func(name string) bool {
	return func(name string) bool {
		if config.ValidProfileName(name) != nil {
			return false
		}
		cfg, err := load()
		if err != nil {
			return false
		}
		_, known := cfg.Profiles[name]
		return known
	}
}

// Args is exec's argument check on both backends: no word at all is the
// command missing, as when nothing follows "--" (a usage error: the
// CLIs' clicore.GroupCommands makes every Args error one).
func Args(_ *cobra.Command, args []string) error {
	if len(args) == 0 {
		return errors.New("exec: no command")
	}
	return nil
}
