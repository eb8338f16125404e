package cli

import (
	"fmt"
	"sync"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/domain"
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
	cfg, err := config.Load(g.configPath)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(g.io.ErrOut, "lazaret: warning: %s\n", w)
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
	for _, w := range cfg.Warnings {
		fmt.Fprintf(g.io.ErrOut, "lazaret: warning: %s\n", w)
	}
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
	if profile == "" {
		profile = config.DefaultProfileName
	}
	if err := config.ValidProfileName(profile); err != nil {
		return nil, nil, usageError{fmt.Errorf("profile: %w", err)}
	}
	p, err := cfg.Profile(profile)
	if err != nil {
		return nil, nil, withHint(err, exitUsage, "pick a profile listed above, or add [profiles.<name>] to the configuration (`lazaret init` writes an example)")
	}
	ws, err := g.chooseWorkspace(cfg, p, workspace)
	if err != nil {
		return nil, nil, err
	}
	runtimeDir, err := domain.RuntimeDir()
	if err != nil {
		return nil, nil, withHint(fmt.Errorf("runtime directory: %w", err), exitSetup,
			"set XDG_RUNTIME_DIR to a directory you own (mode 0700), e.g. /run/user/$(id -u)")
	}
	a, err := domain.New(p.Name, ws, cfg.DataRoot, runtimeDir, cfg.Escalation.SocketDir)
	if err != nil {
		return nil, nil, err
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
