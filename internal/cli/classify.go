package cli

import (
	"errors"
	"github.com/lazaret-dev/lazaret/internal/clicore"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/cli/review"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

// classify maps errors of the internal packages to an exit code and a hint.
func classify(err error) (int, string) {
	switch {
	case config.Errors(err) != nil:
		code := exitConfig
		if config.IsSecurity(err) {
			code = exitSecurity
		}
		return code, configHint(config.Errors(err), false)
	case errors.Is(err, podman.ErrNotInstalled):
		return exitSetup, "run `lazaret doctor` (or `make run`, which installs what is missing)"
	case errors.Is(err, podman.ErrUserNamespaceLost):
		return exitSetup, "run `podman system migrate` (podman's pause process was killed; the containers it kept are gone), then run lazaret again"
	case errors.Is(err, podman.ErrNoSuchImage):
		return exitSetup, "run `lazaret image build` to build the local images"
	case errors.Is(err, locate.ErrNotFound):
		return exitSetup, "run `lazaret doctor` to see what is missing (`make install` installs lazaret's companion binaries and the pinned runsc)"
	case errors.Is(err, gitrepo.ErrNoCommits):
		return exitUsage, "branch mode starts the agent from your current commit: commit once, or set git_mode = \"direct\" in the profile"
	case errors.Is(err, gitrepo.ErrBranchModeNeedsRepo), errors.Is(err, gitrepo.ErrNotRepository), errors.Is(err, gitrepo.ErrBareRepository):
		return exitUsage, "run lazaret at the top level of a repository's working tree, or set git_mode = \"direct\""
	case errors.Is(err, review.ErrNoAgentBranch):
		return exitUsage, "start a sandbox for this profile here first; the agent branch is created then"
	case errors.Is(err, review.ErrDirtyTree), errors.Is(err, review.ErrOperationInPrg):
		return exitFailure, "commit or stash your changes (or finish the operation in progress), then merge again"
	case errors.Is(err, review.ErrDetachedHead):
		return exitFailure, "check out the branch to merge into, then merge again"
	case errors.Is(err, review.ErrMergeConflict):
		return exitFailure, "resolve it by hand: `git merge lazaret/agent-<profile>`, or ask the agent to rebase onto your branch"
	case errors.Is(err, review.ErrSandboxRunning):
		return exitFailure, "stop the sandbox first (`lazaret stop [PROFILE]`)"
	case errors.Is(err, hostgit.ErrNotInstalled):
		return exitSetup, "install git on the host"
	}
	return exitFailure, ""
}

// configHint is clicore.ConfigHint: the same words on both backends.
func configHint(errs []*config.Error, listed bool) string { return clicore.ConfigHint(errs, listed) }
