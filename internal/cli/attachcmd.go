package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore/keeper"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

func newAttachCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "attach [PROFILE] [SESSION]",
		Args:  cobra.MaximumNArgs(2),
		Short: "Attach this terminal to a kept session (a detached shell)",
		Long: `Attach this terminal to a session a keeper holds: a shell that was detached
(its detach keys, a closed terminal, --detach), with its screen redrawn. With
no SESSION, the one kept session of PROFILE (default "default") in this
workspace; SESSION is a prefix of a session id as "lazaret ps" shows it. A
terminal attached before is detached. The detach keys ([session]
detach_keys, default ctrl-\ then d) leave it again.`,
		RunE: func(cmd *cobra.Command, args []string) error { return runAttach(g, args) },
	}
}

func runAttach(g *globalOptions, args []string) error {
	if err := g.refuseRoot(); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	profile, prefix := "", ""
	switch len(args) {
	case 1:
		if _, ok := cfg.Profiles[args[0]]; ok {
			profile = args[0]
		} else {
			prefix = args[0]
		}
	case 2:
		profile, prefix = args[0], args[1]
	}
	rt, err := domain.RuntimeDir()
	if err != nil {
		return err
	}
	all, err := keeper.List(domain.KeeperDir(rt))
	if err != nil {
		return err
	}
	i, err := g.chooseKept(cfg, all, profile, prefix)
	if err != nil {
		return err
	}
	return attachKept(g, cfg, i)
}

// chooseKept picks the session to attach: the one matching prefix, or
// the one of profile's sandbox of this workspace.
func (g *globalOptions) chooseKept(cfg *config.Config, all []keeper.Info, profile, prefix string) (keeper.Info, error) {
	var match []keeper.Info
	what := ""
	if prefix != "" {
		what = "session " + prefix
		for _, i := range all {
			if i.Matches(prefix) && (profile == "" || i.Profile == profile) {
				match = append(match, i)
			}
		}
	} else {
		p, a, err := g.resolveDomain(cfg, profile, "")
		if err != nil {
			return keeper.Info{}, err
		}
		what = "kept session of profile " + p.Name + " in " + a.Workspace
		for _, i := range all {
			if i.Profile == p.Name && i.Workspace == a.Workspace {
				match = append(match, i)
			}
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return keeper.Info{}, withHint(fmt.Errorf("no %s", what), exitFailure, "`lazaret ps` lists the kept sessions")
	}
	var b strings.Builder
	for _, i := range match {
		fmt.Fprintf(&b, "\n  %s  %s  %s", i.ShortID(), field(i.Profile), field(i.Workspace))
	}
	return keeper.Info{}, withHint(errors.New("several kept sessions match; name one:"+b.String()), exitUsage, "lazaret attach [PROFILE] SESSION")
}
