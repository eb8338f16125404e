package gitrepo

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// WorkspaceDirError: the directory a command names as its workspace (or
// runs in) does not exist or is not a directory. Each front end words it.
type WorkspaceDirError struct {
	Dir string
	Err error // the Stat error; nil for "not a directory"
}

func (e *WorkspaceDirError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("workspace: %v", e.Err)
	}
	return fmt.Sprintf("workspace %s: not a directory", e.Dir)
}

func (e *WorkspaceDirError) Unwrap() error { return e.Err }

// OwnedByUser reports whether path (not followed) belongs to this user or
// to root, who can do anything anyway. A variable so that tests can
// simulate another user's files without chown.
var OwnedByUser = func(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (int(st.Uid) == os.Getuid() || st.Uid == 0)
}

// ChooseWorkspace is the one resolution of the Agent Workspace, the local
// CLI's and lazaret-kube's (a Domain Anchor is profile × this path, so
// both must find the same one: lazaret-kube writes its audit entries in
// the state store `lazaret audit` reads). dir is the directory named by
// --workspace (explicit) or the current one. It must be a directory; the
// result is canonical (symlinks resolved). An explicit dir is taken as
// is. Otherwise, outside direct mode (gitMode is the profile's git_mode),
// a dir with no .git of its own inside a git work tree gives the tree's
// top level (EnclosingRepo: only a repository of the user's that
// acceptable allows). The caller then checks the result with
// config.CheckWorkspace, which acceptable usually is.
func ChooseWorkspace(dir string, explicit bool, gitMode string, acceptable func(string) bool) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", &WorkspaceDirError{Dir: dir, Err: err}
	}
	if !fi.IsDir() {
		return "", &WorkspaceDirError{Dir: dir}
	}
	ws, err := domain.Canonical(dir)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !explicit && gitMode != ModeDirect && !HasGitEntry(ws) {
		if top := EnclosingRepo(ws, acceptable); top != "" {
			ws = top
		}
	}
	return ws, nil
}

// EnclosingRepo returns the nearest ancestor of dir holding a .git entry,
// if that repository is the user's (the directory and its .git are owned
// by this uid, or by root: a .git another user planted in a shared parent
// is not taken) and acceptable says it may be a workspace (the home
// directory of a dotfiles repository is not: then dir stays the
// workspace). "" when there is none. dir must be canonical.
func EnclosingRepo(dir string, acceptable func(string) bool) string {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		if HasGitEntry(d) {
			if OwnedByUser(d) && OwnedByUser(filepath.Join(d, ".git")) && acceptable(d) {
				return d
			}
			return ""
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}
