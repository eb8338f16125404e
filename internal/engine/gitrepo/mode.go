package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Modes of the Git Sentry.
const (
	ModeBranch = "branch"
	ModeDirect = "direct"
)

// ErrBranchModeNeedsRepo: git_mode = "branch" on a directory that is not
// the top level of a git repository.
var ErrBranchModeNeedsRepo = errors.New(`git_mode = "branch" needs a workspace that is the top level of a git repository`)

// ResolveMode decides the Git Sentry mode of workspace for the profile's
// git_mode ("", "branch" or "direct"): empty means branch in a git
// repository (a workspace with a .git entry) and direct elsewhere.
func ResolveMode(gitMode, workspace string) (string, error) {
	switch gitMode {
	case ModeDirect:
		return ModeDirect, nil
	case ModeBranch:
		if !HasGitEntry(workspace) {
			return "", fmt.Errorf("%s: %w", workspace, ErrBranchModeNeedsRepo)
		}
		return ModeBranch, nil
	case "":
		if HasGitEntry(workspace) {
			return ModeBranch, nil
		}
		return ModeDirect, nil
	}
	return "", fmt.Errorf("git_mode %q: want \"branch\" or \"direct\"", gitMode)
}

// SkippedRefsFile lists, one per line and escaped, the sandbox branches
// the last sync did not bring over; `lazaret status` shows it.
func SkippedRefsFile(domainRoot string) string {
	return filepath.Join(domainRoot, "gitsentry", "skipped-refs")
}

// ReadSkippedRefs returns the escaped names SkippedRefsFile holds.
func ReadSkippedRefs(domainRoot string) []string {
	data, err := os.ReadFile(SkippedRefsFile(domainRoot))
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}
