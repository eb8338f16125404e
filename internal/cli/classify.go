package cli

import (
	"errors"

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

// configHint says what to do about configuration errors, true to the
// first one: a key of the file, the TOML syntax, the file itself, the
// profile or workspace of the command line, or where the file is looked
// for. listed is true when every error was printed (`lazaret config check`).
func configHint(errs []*config.Error, listed bool) string {
	e := errs[0]
	for _, x := range errs {
		if x.IsSecurity {
			e = x // the refusal matters most
			break
		}
	}
	// With more than one problem, the message itself ends "(and N more;
	// run `lazaret config check`)".
	key := "the key named above"
	if listed && len(errs) > 1 {
		key = "the keys named above"
	}
	switch {
	case e.Key == config.WorkspaceKey:
		return "run lazaret in a project directory (not /, a system directory, or a directory containing lazaret's data_root)"
	case e.Key == config.ProfileKey:
		return "name a profile defined in the configuration, or add [profiles.<name>] to it (`lazaret init` writes an example)"
	case e.IsSecurity && e.Key == "":
		return "lazaret reads only a configuration file owned by you (or root) and not writable by others: fix its owner or mode"
	case e.IsSecurity:
		return "the configuration asks for something unsafe: change " + key + " (see " + locate.Doc("CONFIG.md") + ")"
	case e.Key != "":
		return "fix " + key + " (see " + locate.Doc("CONFIG.md") + ")"
	case e.Line > 0:
		return "fix the TOML syntax on the line named above (see " + locate.Doc("CONFIG.md") + ")"
	case e.File != "":
		return "the configuration must be a readable regular file of at most 1 MiB; pass another with --config"
	}
	return "set HOME (or XDG_CONFIG_HOME), or pass --config FILE"
}
