package kubecli

import (
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// target is one Domain Anchor on the cluster: a profile and the canonical
// workspace, and its hash (the claim's name).
type target struct {
	profile   *config.Profile
	workspace string
	hash      string
}

// resolve picks the profile (empty: "default") and the workspace
// (--workspace, else the current directory or, outside direct mode, the
// top level of the user's git repository around it): clicore's
// resolution, the local CLI's, so that a directory's Domain Anchor (the
// claim's name, the audit trail `lazaret audit` reads, the review verbs
// handed to the local CLI) does not depend on the backend.
func (g *globals) resolve(cfg *config.Config, profile string) (*target, error) {
	p, err := clicore.Profile(cfg, profile)
	if err != nil {
		return nil, err
	}
	ws, err := clicore.Workspace(cfg, p, g.workspace, g.log)
	if err != nil {
		return nil, err
	}
	return &target{profile: p, workspace: ws, hash: domain.Hash(p.Name, ws)}, nil
}
