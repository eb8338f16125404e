package cli

import (
	"sync"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// loadedConfigs caches the configuration per invocation, so that commands
// calling loadConfig more than once print its warnings only once.
var loadedConfigs sync.Map // *globalOptions → *config.Config

// loadConfig loads the configuration named by --config (default location
// otherwise) and prints its warnings on stderr, once per invocation.
// Its errors are *config.Error or config.ErrorList (exit code 4, or 5 for
// a path-safety violation; see classify).
func (g *globalOptions) loadConfig() (*config.Config, error) {
	if c, ok := loadedConfigs.Load(g); ok {
		return c.(*config.Config), nil
	}
	cfg, err := clicore.LoadConfig(g.configPath, g.io.ErrOut)
	if err != nil {
		return nil, err
	}
	loadedConfigs.Store(g, cfg)
	return cfg, nil
}

// loadDataRootConfig is loadConfig for a command that needs only
// data_root and escalation.socket_dir (`stop --all`): a configuration
// broken elsewhere is loaded, its problems printed as warnings.
func (g *globalOptions) loadDataRootConfig() (*config.Config, error) {
	cfg, err := config.LoadDataRoot(g.configPath)
	if err != nil {
		return nil, err
	}
	clicore.Warn(g.io.ErrOut, cfg.Warnings)
	return cfg, nil
}

// resolveDomain picks the profile (empty means "default") and builds the
// Domain Anchor of workspace (empty means --workspace, else the current
// directory or the top level of the repository it is in: see
// chooseWorkspace), which must be an existing directory that
// config.CheckWorkspace accepts; the profile's volumes are checked for
// this domain too. Nothing is created before these checks pass; then the
// runtime directory is (0700, owner-checked); the socket dir comes from
// the configuration.
func (g *globalOptions) resolveDomain(cfg *config.Config, profile, workspace string) (*config.Profile, *domain.Anchor, error) {
	p, err := clicore.Profile(cfg, profile)
	if err != nil {
		return nil, nil, err
	}
	ws, err := g.chooseWorkspace(cfg, p, workspace)
	if err != nil {
		return nil, nil, err
	}
	a, err := clicore.Anchor(cfg, p, ws)
	if err != nil {
		return nil, nil, err
	}
	if g.attempt != "" {
		if a, err = clicore.OpenAttempt(a, g.attempt, g.attemptBackend); err != nil {
			return nil, nil, err
		}
	}
	// Volumes that are only dangerous for this workspace (its .git, the
	// Domain Root) are refused here, in the user's terminal with exit code
	// 5, before any command creates the domain's directories.
	if _, err := p.ResolveVolumes(config.AnchorTokens(a)); err != nil {
		return nil, nil, err
	}
	if g.log != nil {
		g.log.Debug("domain resolved", "profile", a.Profile, "workspace", a.Workspace, "hash", a.Hash)
	}
	return p, a, nil
}

// completeProfiles completes a --profile flag with the configured profiles.
func (g *globalOptions) completeProfiles(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	cfg, err := config.Load(g.configPath)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return cfg.ProfileNames(), cobra.ShellCompDirectiveNoFileComp
}
