package cli

import (
	"errors"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/gitsentry"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/podman"
)

// classify maps errors of the internal packages to an exit code and a hint.
func classify(err error) (int, string) {
	switch {
	case config.IsSecurity(err):
		return exitSecurity, "the configuration asks for something unsafe; fix the key named above (see docs/CONFIG.md)"
	case config.Errors(err) != nil:
		return exitConfig, "fix the key named above; `lazaret config check` lists every problem (see docs/CONFIG.md)"
	case errors.Is(err, podman.ErrNotInstalled):
		return exitSetup, "run `lazaret doctor` (or `make run`, which installs what is missing)"
	case errors.Is(err, podman.ErrNoSuchImage):
		return exitSetup, "run `lazaret image build` to build the local images"
	case errors.Is(err, locate.ErrNotFound):
		return exitSetup, "run `lazaret doctor` to see what is missing (the pinned runsc is installed by `make install`)"
	case errors.Is(err, gitsentry.ErrNoCommits):
		return exitUsage, "branch mode starts the agent from your current commit: commit once, or set git_mode = \"direct\" in the profile"
	case errors.Is(err, gitsentry.ErrBranchModeNeedsRepo), errors.Is(err, gitsentry.ErrNotRepository), errors.Is(err, gitsentry.ErrBareRepository):
		return exitUsage, "run lazaret at the top level of a repository's working tree, or set git_mode = \"direct\""
	case errors.Is(err, gitsentry.ErrNoAgentBranch):
		return exitUsage, "start a sandbox for this profile here first; the agent branch is created then"
	case errors.Is(err, gitsentry.ErrDirtyTree), errors.Is(err, gitsentry.ErrOperationInPrg):
		return exitFailure, "commit or stash your changes (or finish the operation in progress), then merge again"
	case errors.Is(err, gitsentry.ErrDetachedHead):
		return exitFailure, "check out the branch to merge into, then merge again"
	case errors.Is(err, gitsentry.ErrMergeConflict):
		return exitFailure, "resolve it by hand: `git merge lazaret/agent-<profile>`, or ask the agent to rebase onto your branch"
	case errors.Is(err, gitsentry.ErrSandboxRunning):
		return exitFailure, "stop the sandbox first (`lazaret stop`)"
	case errors.Is(err, gitsentry.ErrGitNotInstalled):
		return exitSetup, "install git on the host"
	}
	return exitFailure, ""
}
