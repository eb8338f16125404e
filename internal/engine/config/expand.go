package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// Tokens are the values of the {token} placeholders of one Domain Anchor.
// {profile_dir} and {domain_dir} are derived from them (through the domain
// package, the one table of host paths).
type Tokens struct {
	ProfileName  string
	DataRoot     string // canonical Storage Root
	DomainHash   string
	WorkspaceDir string // canonical host workspace
}

// AnchorTokens returns the tokens of a Domain Anchor.
func AnchorTokens(a *domain.Anchor) Tokens {
	return Tokens{ProfileName: a.Profile, DataRoot: a.DataRoot, DomainHash: a.Hash, WorkspaceDir: a.Workspace}
}

func (t Tokens) anchor() *domain.Anchor {
	return &domain.Anchor{Profile: t.ProfileName, DataRoot: t.DataRoot, Hash: t.DomainHash, Workspace: t.WorkspaceDir}
}

// value returns the expansion of the token name.
func (t Tokens) value(name string) string {
	a := t.anchor()
	switch name {
	case "profile_name":
		return t.ProfileName
	case "profile_dir":
		return a.ProfileDir()
	case "domain_hash":
		return t.DomainHash
	case "domain_dir":
		return a.Root()
	case "workspace_dir":
		return t.WorkspaceDir
	}
	return ""
}

// tokenNames are the only placeholders a host path may contain.
var tokenNames = map[string]bool{
	"profile_name": true, "profile_dir": true, "domain_hash": true, "domain_dir": true, "workspace_dir": true,
}

// domainTokens are the tokens whose value depends on the workspace, known
// only when a sandbox is resolved for a concrete domain.
var domainTokens = []string{"{domain_hash}", "{domain_dir}", "{workspace_dir}"}

func hasDomainToken(s string) bool {
	for _, t := range domainTokens {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

// expandTokens replaces every {token} of s with value(token). A brace that
// is not part of a known token is an error: a typo must never become a
// literal directory name.
func expandTokens(s string, value func(string) string) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexAny(s, "{}")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if s[i] == '}' {
			return "", ruleErrf("unmatched '}' (tokens are {profile_name}, {profile_dir}, {domain_hash}, {domain_dir}, {workspace_dir})")
		}
		j := strings.IndexAny(s[i+1:], "{}")
		if j < 0 || s[i+1+j] != '}' {
			return "", ruleErrf("unmatched '{' (tokens are {profile_name}, {profile_dir}, {domain_hash}, {domain_dir}, {workspace_dir})")
		}
		name := s[i+1 : i+1+j]
		if !tokenNames[name] {
			return "", ruleErrf("unknown token {%s} (tokens are {profile_name}, {profile_dir}, {domain_hash}, {domain_dir}, {workspace_dir})", oneLine(name))
		}
		b.WriteString(s[:i])
		b.WriteString(value(name))
		s = s[i+1+j+1:]
	}
}

// homeDir is $HOME, else the passwd entry of the current user.
func homeDir() (string, error) {
	if h := os.Getenv("HOME"); h != "" {
		return h, nil
	}
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("$HOME is empty and the passwd entry cannot be read: %w", err)
	}
	if u.HomeDir == "" {
		return "", errors.New("$HOME is empty and the passwd entry has no home directory")
	}
	return u.HomeDir, nil
}

// expandHome expands a leading ~ (and only a leading one: "some/~" is a
// literal). ~user is refused rather than looked up, so a config never
// depends on another account's home.
func expandHome(s string) (string, error) {
	if !strings.HasPrefix(s, "~") {
		return s, nil
	}
	if s != "~" && !strings.HasPrefix(s, "~/") {
		return "", ruleErrf("~user is not supported (only ~ and ~/...): %s", quoteValue(s))
	}
	home, err := homeDir()
	if err != nil {
		return "", ruleErrf("%v", err)
	}
	return home + s[1:], nil
}

// checkPathChars refuses characters that have no place in a path lazaret
// hands to podman or fuse-overlayfs: NUL and control characters, and the
// option separators of --mount and overlay mount options (',' and ':'),
// which would let a path inject mount options.
func checkPathChars(s string) error {
	if strings.ContainsRune(s, 0) {
		return securityErrf("contains a NUL byte")
	}
	if strings.ContainsFunc(s, isControl) {
		return ruleErrf("contains a control character: %s", quoteValue(s))
	}
	if strings.ContainsAny(s, ",:") {
		return securityErrf("contains ',' or ':', which would inject mount options: %s", quoteValue(s))
	}
	return nil
}

// hasDotDot reports whether the slash-separated path p has a ".." element.
func hasDotDot(p string) bool {
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return true
		}
	}
	return false
}

// expandString expands ~ and tokens in s and checks the result is an
// absolute path without "..": the syntax-level half of ExpandPath, also
// used at load time when the domain tokens are not yet known.
func expandString(s string, value func(string) string) (string, error) {
	if err := checkPathChars(s); err != nil {
		return "", err
	}
	p, err := expandHome(s)
	if err != nil {
		return "", err
	}
	p, err = expandTokens(p, value)
	if err != nil {
		return "", err
	}
	if err := checkPathChars(p); err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		return "", ruleErrf("must be an absolute path (or start with ~/ or a token): %s", quoteValue(p))
	}
	// Checked on the expanded string, before any cleaning: a ".." would
	// let a token such as {profile_dir} climb out of the Storage Root.
	if hasDotDot(p) {
		return "", securityErrf("contains a '..' segment after expansion: %s", quoteValue(p))
	}
	return filepath.Clean(p), nil
}

// ExpandPath expands ~ and the tokens of t in s, refuses a ".." segment
// (security error) and returns the canonical path: symlinks are resolved,
// and for a path that does not exist yet its longest existing parent is.
func ExpandPath(s string, t Tokens) (string, error) {
	p, err := expandString(s, t.value)
	if err != nil {
		return "", err
	}
	return canonicalizeChecked(p)
}

// canonicalizeChecked canonicalizes p and checks the characters of the
// result again: a symlink may point at a name with ',' or ':'.
func canonicalizeChecked(p string) (string, error) {
	c, err := canonicalize(p)
	if err != nil {
		return "", err
	}
	if err := checkPathChars(c); err != nil {
		return "", err
	}
	return c, nil
}

// canonicalize resolves every symlink of the absolute, clean path p. A
// tail that does not exist yet is kept as written (it has no ".." and no
// symlink to resolve). A dangling symlink is refused: creating the path
// later would follow it to wherever it points.
func canonicalize(p string) (string, error) {
	rest := ""
	cur := p
	retries := 0
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", ruleErrf("cannot resolve %s: %v", quoteValue(p), unwrapPathError(err))
		}
		if fi, lerr := os.Lstat(cur); lerr == nil {
			// Made between the two looks (a starting coordinator creates
			// the data root while `lazaret status` reads the config):
			// resolve again, a bounded number of times.
			if _, serr := os.Stat(cur); (serr == nil || fi.Mode()&fs.ModeSymlink == 0) && retries < 3 {
				retries++
				continue
			}
			return "", securityErrf("%s is a dangling symlink", quoteValue(cur))
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", ruleErrf("cannot resolve %s: %v", quoteValue(p), unwrapPathError(err))
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// within reports whether p is base or lies beneath it (both clean, absolute).
func within(p, base string) bool {
	if base == "/" {
		return true
	}
	return p == base || strings.HasPrefix(p, base+"/")
}

// RuntimeDirPath computes the per-user runtime directory the way
// domain.RuntimeDir does, without creating it (loading a configuration
// must not create anything).
func RuntimeDirPath() string {
	if base := os.Getenv("XDG_RUNTIME_DIR"); base != "" {
		return filepath.Join(base, "lazaret")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("lazaret-%d", os.Getuid()))
}
