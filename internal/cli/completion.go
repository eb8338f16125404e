package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// completeProfileArg completes a first argument PROFILE with the
// configured profiles (each described by its image). It only reads the
// configuration: no sandbox, no podman, and nothing at all, silently, when
// the configuration is missing or invalid (a shell completion must never
// print errors into the user's command line).
func (g *globalOptions) completeProfileArg(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cfg, err := config.Load(g.configPath)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, name := range cfg.ProfileNames() {
		if strings.HasPrefix(name, toComplete) {
			out = append(out, name+"\t"+cfg.Profiles[name].Image)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeProfilesEverywhere gives every command whose usage has a
// [PROFILE] argument (shell, exec, status, stop, diff, log, merge, …) the profile
// completion, so that no verb is forgotten; a command with its own
// completion keeps it.
func (g *globalOptions) completeProfilesEverywhere(c *cobra.Command) {
	if c.ValidArgsFunction == nil && strings.Contains(c.Use, " [PROFILE]") {
		c.ValidArgsFunction = g.completeProfileArg
	}
	for _, sub := range c.Commands() {
		g.completeProfilesEverywhere(sub)
	}
}
