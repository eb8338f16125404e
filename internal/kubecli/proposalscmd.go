package kubecli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// newProposalsCmd is `lazaret --backend kubernetes proposals`, the local
// CLI's verb (clicore.NewProposalsCmd) over the control sockets of this
// host's running cluster sessions of the target: each session's
// lazaret-kube process holds its agent's proposals (proposals.go).
func newProposalsCmd(g *globals) *cobra.Command {
	return clicore.NewProposalsCmd(clicore.ProposalsSpec{
		Out: func() io.Writer { return g.io.Out },
		Dial: func(cmd *cobra.Command, positional, _ string) (clicore.ProposalsClient, string, error) {
			cfg, err := g.loadConfig()
			if err != nil {
				return nil, "", err
			}
			t, err := g.resolve(cfg, positional)
			if err != nil {
				return nil, "", err
			}
			c, err := g.dialSessions(cmd.Context(), t)
			if err != nil {
				return nil, "", err
			}
			return c, t.profile.Name, nil
		},
		ConfigPath: func() (string, error) {
			if g.configPath != "" {
				return g.configPath, nil
			}
			return config.DefaultPath()
		},
	})
}
