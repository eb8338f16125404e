package kubecli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// newProposalsCmd is `lazaret --backend kubernetes proposals`, the local
// CLI's verb (clicore.NewProposalsCmd). A cluster session's proposals
// wait in that session's own lazaret-kube process (internal/kubecli
// proposals.go), which no other process can reach yet: the verb resolves
// the target (a wrong profile or workspace is told as such) and then
// says where they are decided.
func newProposalsCmd(g *globals) *cobra.Command {
	return clicore.NewProposalsCmd(clicore.ProposalsSpec{
		Out: func() io.Writer { return g.io.Out },
		Dial: func(_ *cobra.Command, positional, _ string) (clicore.ProposalsClient, string, error) {
			cfg, err := g.loadConfig()
			if err != nil {
				return nil, "", err
			}
			t, err := g.resolve(cfg, positional)
			if err != nil {
				return nil, "", err
			}
			return nil, "", clicore.WithHint(fmt.Errorf("the proposals of profile %s's cluster sandbox for %s wait in the lazaret-kube process of the session whose agent proposed them, which this command cannot reach",
				t.profile.Name, visible.Line(t.workspace)), 1, proposalsOnTheTerminal)
		},
		ConfigPath: func() (string, error) {
			if g.configPath != "" {
				return g.configPath, nil
			}
			return config.DefaultPath()
		},
	})
}

// proposalsOnTheTerminal is the hint of `proposals` on Kubernetes.
const proposalsOnTheTerminal = "decide them on that session's terminal, where each is shown as it comes ([A] approves, [D] denies); to keep an approved rule, add it to the configuration by hand"
