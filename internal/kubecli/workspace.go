package kubecli

import (
	"errors"
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/gitrepo"
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
// top level of the user's git repository around it), resolved and checked
// as the local CLI does.
func (g *globals) resolve(cfg *config.Config, profile string) (*target, error) {
	if profile == "" {
		profile = config.DefaultProfileName
	}
	if err := config.ValidProfileName(profile); err != nil {
		return nil, usageError{fmt.Errorf("profile: %w", err)}
	}
	p, err := cfg.Profile(profile)
	if err != nil {
		return nil, usageError{err}
	}
	dir := g.workspace
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("current directory: %w", err)
		}
	}
	// The local CLI's resolution (gitrepo.ChooseWorkspace), not a copy: the
	// claim's name, the audit trail `lazaret audit` reads and the review
	// verbs handed to the local CLI all hang on this Domain Anchor.
	ws, err := gitrepo.ChooseWorkspace(dir, g.workspace != "", p.GitMode, func(d string) bool { return cfg.CheckWorkspace(d) == nil })
	if err != nil {
		var de *gitrepo.WorkspaceDirError
		if errors.As(err, &de) {
			return nil, usageError{err}
		}
		return nil, err
	}
	if err := cfg.CheckWorkspace(ws); err != nil {
		var we *config.WorkspaceError
		if errors.As(err, &we) {
			return nil, refusal{err.Error(), "cd into a project directory, or name one with --workspace DIR"}
		}
		return nil, err
	}
	return &target{profile: p, workspace: ws, hash: domain.Hash(p.Name, ws)}, nil
}
