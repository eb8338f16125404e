package clicore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/lazaret-dev/lazaret/internal/engine/attempt"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

// LoadConfig loads the configuration named by --config (path; the default
// location when empty) and prints its warnings on stderr. Its errors are
// *config.Error or config.ErrorList (exit code 4, or 5 for a path-safety
// violation).
func LoadConfig(path string, stderr io.Writer) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	Warn(stderr, cfg.Warnings)
	return cfg, nil
}

// Warn prints the configuration's warnings on stderr.
func Warn(stderr io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "lazaret: warning: %s\n", w)
	}
}

// Profile is the profile named (empty: "default"), a usage error when
// there is none by that name.
func Profile(cfg *config.Config, name string) (*config.Profile, error) {
	if name == "" {
		name = config.DefaultProfileName
	}
	if err := config.ValidProfileName(name); err != nil {
		return nil, UsageError{Err: fmt.Errorf("profile: %w", err)}
	}
	p, err := cfg.Profile(name)
	if err != nil {
		return nil, WithHint(err, exitcode.Usage, "pick a profile listed above, or add [profiles.<name>] to the configuration (`lazaret init` writes an example)")
	}
	return p, nil
}

// WorkspaceHint is the way out of a refused workspace.
func WorkspaceHint() string {
	return "cd into a project directory, or name one with --workspace DIR (see " + locate.Doc("CONFIG.md") + ", \"Workspace\")"
}

// Workspace returns the canonical Agent Workspace of profile p, on both
// backends: the Domain Anchor of a directory must not depend on the
// backend (the claim's name, the audit trail `lazaret audit` reads and the
// review verbs all hang on it). An explicit directory (--workspace, or
// the directory the CLI names for its coordinator) is taken as is.
// Otherwise it is the current directory, or, when that is inside a git
// repository the user owns and the profile is not in direct mode, the
// repository's top level (gitrepo.ChooseWorkspace): branch mode needs the
// top level, and mounting a subdirectory read-write instead would hand
// the agent the user's files without the user having asked for direct
// mode. Either way config.CheckWorkspace must accept the result (exit
// code 5 and a hint otherwise), before anything is created. log may be
// nil.
func Workspace(cfg *config.Config, p *config.Profile, explicit string, log *slog.Logger) (string, error) {
	dir := explicit
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("current directory: %w", err)
		}
		dir = wd
	}
	ws, err := gitrepo.ChooseWorkspace(dir, explicit != "", p.GitMode, func(d string) bool { return cfg.CheckWorkspace(d) == nil })
	if err != nil {
		var de *gitrepo.WorkspaceDirError
		if errors.As(err, &de) {
			return "", UsageError{Err: err}
		}
		return "", err
	}
	if log != nil && ws != dir {
		log.Debug("workspace resolved", "workspace", ws, "cwd", dir)
	}
	if err := cfg.CheckWorkspace(ws); err != nil {
		var we *config.WorkspaceError
		if errors.As(err, &we) {
			return "", WithHint(err, exitcode.Security, WorkspaceHint())
		}
		return "", err
	}
	return ws, nil
}

// Anchor is the Domain Anchor of profile p in workspace ws (canonical,
// from Workspace): its directories under the configuration's data root,
// the runtime directory (created 0700, owner-checked) and the socket
// directory. Both backends' audit trails of a directory are its state
// store's.
func Anchor(cfg *config.Config, p *config.Profile, ws string) (*domain.Anchor, error) {
	runtimeDir, err := domain.RuntimeDir()
	if err != nil {
		return nil, WithHint(fmt.Errorf("runtime directory: %w", err), exitcode.Setup,
			"set XDG_RUNTIME_DIR to a directory you own (mode 0700), e.g. /run/user/$(id -u)")
	}
	return domain.New(p.Name, ws, cfg.DataRoot, runtimeDir, cfg.Escalation.SocketDir)
}

// OpenAttempt is the Anchor of attempt name of parent's workspace
// (--attempt) made by backend ("" local, attempt.BackendKubernetes, or
// AnyBackend for the host's review verbs: the branches are the host's on
// both): an unknown or invalid name, or another backend's attempt, is a
// usage error naming it.
func OpenAttempt(parent *domain.Anchor, name, backend string) (*domain.Anchor, error) {
	a, err := attempt.Open(parent, name)
	if err == nil {
		r, rerr := attempt.Read(a)
		if rerr != nil {
			return nil, rerr
		}
		if backend != AnyBackend && r.Backend != backend {
			return nil, WithHint(fmt.Errorf("attempt %s runs on the %s backend", name, backendName(r.Backend)), exitcode.Usage,
				"run the verb with --backend "+backendName(r.Backend))
		}
		return a, nil
	}
	if errors.Is(err, attempt.ErrNotFound) {
		return nil, WithHint(err, exitcode.Usage, "`lazaret attempts` lists this workspace's attempts; `lazaret fork NAME` makes one")
	}
	if err != nil && a == nil && domain.ValidAttemptName(name) != nil {
		return nil, UsageError{Err: fmt.Errorf("--attempt: %w", err)}
	}
	return a, err
}

// AnyBackend lets OpenAttempt take either backend's attempt.
const AnyBackend = "*"

// backendName names a Record.Backend.
func backendName(b string) string {
	if b == "" {
		return "podman"
	}
	return b
}
