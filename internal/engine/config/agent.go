package config

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/cabundle"
)

// Where a profile's State Anchor keeps its changes (the persist key).
const (
	// PersistProfile: under {data_root}/{profile}/overlay, shared by every
	// workspace of the profile (one sandbox of the profile at a time).
	PersistProfile = "profile"
	// PersistWorkspace: under the Domain Root, one copy per workspace.
	PersistWorkspace = "workspace"
)

// DefaultCABundle is the host trust store passed into sandboxes when
// neither ca_bundle key is set (Debian's and Ubuntu's path). When the host
// has none, the image's own trust store is used alone.
const DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

// CABundle is the host CA bundle a profile passes into its sandbox.
type CABundle struct {
	// Path is the canonical host file; empty passes none.
	Path string
	// Explicit is true when a ca_bundle key named it: it must then be
	// valid when a sandbox starts. The default is skipped when absent.
	Explicit bool
	// File, Line and Key locate the key, for errors found at start.
	File string
	Line int
	Key  string
}

// Locate returns err as a one-line error at the key that set the bundle.
func (c CABundle) Locate(err error) error {
	return &Error{File: c.File, Line: c.Line, Key: c.Key, Msg: err.Error()}
}

// ImageLocation returns the file and line of the profile's image key
// (empty and 0 for a built-in image).
func (p *Profile) ImageLocation() (file string, line int) { return p.file, p.imageLine }

// File is the configuration file the profile was read from ("" for a
// built-in profile).
func (p *Profile) File() string { return p.file }

// defaultCABundle is the CA bundle of a configuration without ca_bundle.
func defaultCABundle() CABundle { return CABundle{Path: DefaultCABundle} }

// caBundle validates a ca_bundle value: "" disables it; otherwise a host
// path (~ allowed, no tokens) to a readable regular file of PEM
// certificates without a private key. def is used when s is nil.
func (v *validator) caBundle(key keyPath, s *string, def CABundle) CABundle {
	if s == nil {
		return def
	}
	c := CABundle{Explicit: true, File: v.file, Line: v.pos.lookup(key), Key: key.String()}
	if *s == "" {
		return c
	}
	var p string
	var err error
	if strings.ContainsAny(*s, "{}") {
		err = ruleErrf("tokens are not allowed here")
	} else {
		p, err = expandString(*s, func(string) string { return "" })
	}
	if err == nil {
		p, err = canonicalizeChecked(p)
	}
	if err == nil {
		err = checkSystemPath(p)
	}
	if err == nil {
		if _, _, lerr := cabundle.Load(p); lerr != nil {
			err = ruleErrf("%s", caLoadMessage(lerr))
		}
	}
	if err != nil {
		v.fail(key, err)
		return def
	}
	c.Path = p
	return c
}

// caLoadMessage shortens cabundle.Load's errors for a key's message.
func caLoadMessage(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return "cannot read " + quoteValue(pe.Path) + ": " + pe.Err.Error()
	}
	return err.Error()
}

// agentKeys reads the profile keys of the agent-ready features: persist,
// ca_bundle, and where the image key is (for pull messages).
func (v *validator) agentKeys(cfg *Config, p *Profile, key keyPath, fp *fileProfile) {
	p.imageLine = v.pos.lookup(key.child("image"))
	p.Persist = PersistProfile
	if fp.Persist != nil {
		switch *fp.Persist {
		case PersistProfile, PersistWorkspace:
			p.Persist = *fp.Persist
		default:
			v.fail(key.child("persist"), ruleErrf("invalid persist %s: want \"profile\" (shared by the profile's workspaces) or \"workspace\"", quoteValue(*fp.Persist)))
		}
	}
	p.CABundle = v.caBundle(key.child("ca_bundle"), fp.CABundle, cfg.CABundle)
}

// profileOverlayRoot reports whether p is a profile directory of dataRoot
// ({data_root}/{name}, which holds the profile's State Anchor) or is in a
// profile's State Anchor ({data_root}/{name}/overlay/...). Mounting either
// into a sandbox would let it write the overlay of a profile directly.
func profileOverlayRoot(dataRoot, p string) bool {
	if dataRoot == "" || !within(p, dataRoot) || p == dataRoot {
		return false
	}
	rel, err := filepath.Rel(dataRoot, p)
	if err != nil {
		return false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if parts[0] == "domains" {
		return false // Domain Roots are checked per domain
	}
	return len(parts) == 1 || parts[1] == "overlay"
}

// ImagePinned reports whether ref is pinned (a digest, a tag other than
// latest, or a localhost/ image built here); lazaret pulls only pinned
// images on its own.
func ImagePinned(ref string) bool {
	pinned, err := checkImage(ref)
	return err == nil && pinned
}
