package gitrepo

import (
	"fmt"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// maxRefLen bounds a ref name coming from the sandbox.
const maxRefLen = 200

// ValidBranch reports whether name (without refs/heads/) is a branch name
// lazaret accepts from the sandbox. It is git check-ref-format's rules,
// narrowed to printable ASCII so that names can be written into
// `git update-ref --stdin` lines and shown on a terminal without escaping.
func ValidBranch(name string) error {
	if name == "" || len(name) > maxRefLen {
		return fmt.Errorf("branch name %q: empty or longer than %d bytes", name, maxRefLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`~^:?*[\"'`+"`", c) >= 0 {
			return fmt.Errorf("branch name %q: character %q not allowed", name, c)
		}
	}
	if name == "@" || strings.Contains(name, "@{") || strings.Contains(name, "..") ||
		strings.Contains(name, "//") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".") || strings.HasPrefix(name, "-") {
		return fmt.Errorf("branch name %q: not a valid ref name", name)
	}
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return fmt.Errorf("branch name %q: component %q not allowed", name, part)
		}
	}
	return nil
}

// ValidOID reports whether s is a lowercase hex object name of length n.
func ValidOID(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return strings.Trim(s, "0") != ""
}

// RefMap maps the agent clone's branches to host refs for one profile
// (and attempt: its key is domain.AgentKey, <p>.<attempt>): the agent
// branch lazaret/agent-<key> to refs/heads/lazaret/agent-<key>, every
// other branch X to refs/lazaret/<key>/heads/X.
type RefMap struct {
	Profile string
	Attempt string
}

// RefMapOf is the RefMap of domain a.
func RefMapOf(a *domain.Anchor) RefMap { return RefMap{Profile: a.Profile, Attempt: a.Attempt} }

// key names the domain's refs.
func (m RefMap) key() string { return domain.AgentKey(m.Profile, m.Attempt) }

// AgentBranch is the agent's branch name in the clone.
func (m RefMap) AgentBranch() string { return "lazaret/agent-" + m.key() }

// AgentRef is the host ref of the agent branch.
func (m RefMap) AgentRef() string { return "refs/heads/" + m.AgentBranch() }

// SideRefPrefix holds the host copies of the agent's other branches.
func (m RefMap) SideRefPrefix() string { return "refs/lazaret/" + m.key() + "/heads/" }

// OldRefPrefix holds agent tips kept by reset-branch.
func (m RefMap) OldRefPrefix() string { return "refs/lazaret/" + m.key() + "/old/" }

// HostRef maps a clone ref (refs/heads/<branch>) to its host ref. It fails
// for anything else and for names ValidBranch refuses.
func (m RefMap) HostRef(cloneRef string) (string, error) {
	branch, ok := strings.CutPrefix(cloneRef, "refs/heads/")
	if !ok {
		return "", fmt.Errorf("ref %q: only branches are synced", cloneRef)
	}
	if err := ValidBranch(branch); err != nil {
		return "", err
	}
	if branch == m.AgentBranch() {
		return m.AgentRef(), nil
	}
	return m.SideRefPrefix() + branch, nil
}
