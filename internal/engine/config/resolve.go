package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/suggest"
)

// ResolvedVolume is a volume ready for podman: the host path expanded for
// one domain and canonical.
type ResolvedVolume struct {
	Host      string
	Container string
	ReadOnly  bool
	// Options are relabel options ("z" or "Z").
	Options []string
}

var hashRE = regexp.MustCompile(`^[0-9a-f]{12}$`)

// ResolveVolumes expands the profile's volume host paths for the domain
// of t, refuses ".." and dangerous sources (security errors), and returns
// canonical paths. Host paths that do not exist yet are returned with
// their longest existing parent canonicalized; the caller creates them.
func (p *Profile) ResolveVolumes(t Tokens) ([]ResolvedVolume, error) {
	if err := ValidProfileName(t.ProfileName); err != nil {
		return nil, fmt.Errorf("resolve volumes: %w", err)
	}
	if !hashRE.MatchString(t.DomainHash) || !filepath.IsAbs(t.DataRoot) || !filepath.IsAbs(t.WorkspaceDir) {
		return nil, fmt.Errorf("resolve volumes: incomplete tokens %+v", t)
	}
	guard := p.guard
	if guard == nil {
		guard = newHostGuard(t.DataRoot, "")
	}
	out := make([]ResolvedVolume, 0, len(p.Volumes))
	for i, v := range p.Volumes {
		key := keyPath{"profiles", p.Name, "volumes"}.index(i)
		host, err := ExpandPath(v.Host, t)
		if err == nil {
			err = guard.checkDomainMountSource(host, t)
		}
		if err != nil {
			return nil, p.locateVolume(i, key.child("host").String(), err)
		}
		ro, opts, err := parseMode(v.Mode)
		if err != nil {
			return nil, p.locateVolume(i, key.child("mode").String(), err)
		}
		out = append(out, ResolvedVolume{Host: host, Container: v.Container, ReadOnly: ro, Options: opts})
	}
	return out, nil
}

func (p *Profile) locateVolume(i int, key string, err error) error {
	e := locate(key, err).(*Error)
	e.File = p.file
	if i < len(p.volumeLines) {
		e.Line = p.volumeLines[i]
	}
	return e
}

// locate turns a rule violation found after loading into an *Error that
// names its key.
func locate(key string, err error) error {
	e := &Error{Key: key, Msg: err.Error()}
	if re, ok := err.(*ruleError); ok {
		e.IsSecurity = re.security
	}
	return e
}

// Profile returns the named profile or an error listing the known ones.
func (c *Config) Profile(name string) (*Profile, error) {
	if err := ValidProfileName(name); err != nil {
		return nil, locate(ProfileKey, err)
	}
	if p, ok := c.Profiles[name]; ok {
		return p, nil
	}
	where := "the built-in defaults"
	if c.File != "" {
		where = c.File
	}
	names := c.ProfileNames()
	return nil, &Error{Key: ProfileKey, Msg: fmt.Sprintf("unknown profile %s (defined in %s: %s)%s",
		quoteValue(name), where, strings.Join(names, ", "), suggest.Hint(name, names))}
}

// ProfileKey and WorkspaceKey are the Error keys of a profile or workspace
// given on the command line rather than in the file.
const (
	ProfileKey   = "profile"
	WorkspaceKey = "workspace"
)

// ProfileNames returns the configured profile names, sorted.
func (c *Config) ProfileNames() []string {
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
