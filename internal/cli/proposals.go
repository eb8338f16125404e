package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// newProposalsCmd is `lazaret proposals`: the rules the agent proposed
// with `lazaret-escalate --propose`, as the checker found them, and the
// user's decision on each (docs/POLICY.md). The verb is clicore's, shared
// with lazaret-kube; here it reaches the sandbox's coordinator.
func newProposalsCmd(g *globalOptions) *cobra.Command {
	var profileFlag string
	return clicore.NewProposalsCmd(clicore.ProposalsSpec{
		Out: func() io.Writer { return g.io.Out },
		Dial: func(cmd *cobra.Command, positional, usage string) (clicore.ProposalsClient, string, error) {
			return g.proposalsClient(cmd, positional, profileFlag, usage)
		},
		ConfigPath: g.configFile,
		Setup: func(cmd *cobra.Command, root bool) {
			if root {
				addDeprecatedProfileFlag(g, cmd, true, &profileFlag)
			}
			cmd.ValidArgsFunction = g.completeProfileArg
		},
	})
}

// proposalsClient dials the coordinator of the profile.
func (g *globalOptions) proposalsClient(cmd *cobra.Command, positional, profileFlag, usage string) (clicore.ProposalsClient, string, error) {
	profile, err := g.profileOf(cmd, positional, profileFlag, usage)
	if err != nil {
		return nil, "", err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, "", err
	}
	p, a, err := g.resolveDomain(cfg, profile, "")
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), controlTimeout)
	defer cancel()
	c, err := g.domainClient(a).dial(ctx)
	if errors.Is(err, connect.ErrNotRunning) {
		return nil, "", fmt.Errorf("no sandbox of profile %s runs in %s: proposals live in a running sandbox", p.Name, a.Workspace)
	}
	if err != nil {
		return nil, "", err
	}
	return c, p.Name, nil
}

// configFile is the configuration file (--config, else the default).
func (g *globalOptions) configFile() (string, error) {
	if g.configPath != "" {
		return g.configPath, nil
	}
	return config.DefaultPath()
}
