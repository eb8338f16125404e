package kubecli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
// top level of the git repository around it), checked as locally.
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
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return nil, usageError{fmt.Errorf("--workspace %s: not a directory", dir)}
	}
	ws, err := domain.Canonical(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if g.workspace == "" && p.GitMode != gitrepo.ModeDirect {
		ws = repoTop(ws)
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

// repoTop is the top level of the git work tree around dir, else dir.
func repoTop(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if gitrepo.HasGitEntry(d) {
			return d
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}
