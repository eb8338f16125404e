package cli

import (
	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore"
)

func newAttachCmd(g *globalOptions) *cobra.Command {
	return clicore.Verb("attach", &cobra.Command{
		Short: "Attach this terminal to a kept session (a detached shell)",
		Long:  clicore.AttachLong,
		RunE:  func(cmd *cobra.Command, args []string) error { return runAttach(g, args) },
	})
}

func runAttach(g *globalOptions, args []string) error {
	if err := g.refuseRoot(); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	profile, prefix := clicore.AttachArgs(cfg, args)
	list, err := clicore.KeptList("")
	if err != nil {
		return err
	}
	workspace := ""
	if prefix == "" {
		p, a, err := g.resolveDomain(cfg, profile, "")
		if err != nil {
			return err
		}
		profile, workspace = p.Name, a.Workspace
	}
	i, err := clicore.ChooseKept(list, "lazaret", profile, workspace, prefix)
	if err != nil {
		return err
	}
	return clicore.AttachKept(g.io, "lazaret", cfg, i)
}
