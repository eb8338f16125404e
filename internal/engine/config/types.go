// Package config loads and validates lazaret's TOML configuration: strict
// decoding, ~ and {token} expansion, and host path safety.
package config

import (
	"net/netip"
	"slices"
	"time"
)

// DefaultProfileName is the built-in profile that exists without any
// configuration file.
const DefaultProfileName = "default"

// DefaultImage is the locally built image of the default profile
// (`lazaret image build`).
const DefaultImage = "localhost/lazaret-default:latest"

// Config is a loaded, validated configuration. Host paths in it are
// expanded and canonical, except those that contain per-domain tokens
// (volume hosts), which are expanded by Profile.ResolveVolumes.
type Config struct {
	// File is the path the configuration was read from; empty when only
	// built-in defaults are in use.
	File       string
	DataRoot   string
	Network    Network
	Escalation Escalation
	Profiles   map[string]*Profile
	// CABundle is the global ca_bundle (the host's default trust store
	// when unset); a profile's own ca_bundle replaces it.
	CABundle CABundle
	// Secrets are the [secrets.NAME] tables.
	Secrets map[string]*Secret
	// Cluster is the [cluster] section (the Kubernetes backend).
	Cluster Cluster
	// Resources are the [resources] defaults of every profile's limits.
	Resources Resources
	// Session is the [session] section: detaching (session.go).
	Session Session
	// Notify is the [notify] section: who is told of a pending approval
	// and the other events of an unattended sandbox (notify.go).
	Notify Notify
	// Policy is the [policy] section: the agent's proposals (policy.go).
	Policy Policy
	// Attempts is the [attempts] section: the bound on `lazaret fork`
	// (attempts.go).
	Attempts Attempts
	// Warnings are non-fatal findings (for example an unpinned image).
	Warnings []string
}

// Network is the global [network] section, merged into every profile.
type Network struct {
	AllowEgress  []netip.Prefix
	AllowDomains []string
}

// Escalation is the [escalation] section.
type Escalation struct {
	Enabled   bool
	SocketDir string
	// AutoApprove holds each auto_approve entry parsed into its argv; a
	// last word shellwords.ArgsPlaceholder admits appended plain words.
	AutoApprove [][]string
	// RunnerWarnings name the entries whose program runs what files in
	// the workspace say (make, npm, cargo...), one "file:line: key:
	// message" each; `lazaret config check` prints them.
	RunnerWarnings []string
	// AnswerFrom is AnswerFromSession (only the asking session's own
	// terminal answers its prompts) or AnswerFromAny (also `lazaret
	// approvals answer` from any terminal of the same user).
	AnswerFrom string
	// PendingTimeout ends a pending request unanswered (the agent gets a
	// denial); 0: it waits until answered or the sandbox stops.
	PendingTimeout time.Duration
}

// Profile is one [profiles.<name>] section (or the built-in default).
type Profile struct {
	Name           string
	Image          string
	PersistentDirs []string
	// PackageDirsAdded are the PersistentDirs lazaret added to /usr: the
	// package database that describes it (PackageStateDirs), which the
	// profile did not list. PackageDBOff: persist_package_db = false.
	PackageDirsAdded []string
	PackageDBOff     bool
	// AllowEgress and AllowDomains are the profile's own entries merged
	// with the global [network] ones.
	AllowEgress  []netip.Prefix
	AllowDomains []string
	// Env maps variable names to their resolved values (env:VAR already
	// read from the host environment).
	Env map[string]string
	// EnvFromHost names the Env entries read from the host environment
	// (env:VAR): often credentials, which the Kubernetes backend does not
	// write into a cluster object.
	EnvFromHost []string
	Volumes     []Volume
	// GitMode is "branch" or "direct"; empty means branch in a git
	// repository and direct elsewhere.
	GitMode string
	// WithChanges (with_changes): a new agent clone gets the host working
	// tree's uncommitted changes, as with --with-changes (branch mode).
	WithChanges bool
	// Persist is PersistProfile or PersistWorkspace (persist key).
	Persist string
	// CABundle is the host trust store mounted into the sandbox.
	CABundle CABundle
	// Secrets are the secrets netd injects for this profile.
	Secrets []ProfileSecret
	// Resources bound what the sandbox may use of the host (memory, cpus,
	// pids, disk_reserve, limits).
	Resources Resources
	// WarmPool is the profile's warm_pool on the Kubernetes backend; nil
	// means [cluster].warm_pool.
	WarmPool *int

	// guard refuses dangerous volume host paths; set by Load.
	guard *hostGuard
	// file and volumeLines locate errors found by ResolveVolumes.
	file        string
	volumeLines []int
	imageLine   int
	// envErrs are the env:VAR entries whose host variable is unset. They
	// only matter when a sandbox starts (CheckEnv), so `lazaret stop` or
	// `lazaret status` work without the agent's API keys in the shell.
	envErrs ErrorList
}

// HostErrors are what CheckEnv finds for every profile, each problem
// once (profiles share secrets): what the host lacks for a sandbox to
// start, which `lazaret config check` reports with the file's own.
func (c *Config) HostErrors() []*Error {
	var out []*Error
	seen := map[string]bool{}
	for _, name := range c.ProfileNames() {
		for _, e := range Errors(c.Profiles[name].CheckEnv()) {
			if !seen[e.Error()] {
				seen[e.Error()] = true
				out = append(out, e)
			}
		}
	}
	// The webhook's key is read by the coordinator at every start: a
	// variable unset or a file no longer 0600 is the same kind of problem.
	if w := c.Notify.Webhook; w != nil {
		out = append(out, Errors(w.CheckSecret())...)
	}
	return out
}

// CheckEnv reports the env entries whose env:VAR host variable was unset
// when the configuration was loaded (an *Error, or an ErrorList for more
// than one); commands that start a sandbox call it.
// Secrets whose source cannot give a value are reported the same way.
func (p *Profile) CheckEnv() error {
	errs := append(slices.Clone(p.envErrs), p.CheckSecrets()...)
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errs
}

// Volume is a custom bind mount as written in the file; Host may contain
// tokens until ResolveVolumes expands it.
type Volume struct {
	Host      string
	Container string
	Mode      string
}
