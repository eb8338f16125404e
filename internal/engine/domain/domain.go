// Package domain derives the Domain Anchor of a (profile, workspace) pair and
// is the one table of every host resource name and path scoped by it.
package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Hash returns the Domain Anchor: the first 12 hex characters of
// sha256("<profile>:<canonical workspace>"). The workspace must already be
// canonical (see Canonical).
func Hash(profile, canonicalWorkspace string) string {
	sum := sha256.Sum256([]byte(profile + ":" + canonicalWorkspace))
	return hex.EncodeToString(sum[:])[:12]
}

// Canonical returns the absolute path of dir with every symlink resolved.
func Canonical(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	return real, nil
}

// Anchor is one Domain Anchor with every host resource it scopes.
type Anchor struct {
	Profile   string
	Workspace string // canonical host workspace
	// Attempt names a parallel attempt of (Profile, Workspace) made by
	// `lazaret fork` ("" for the workspace's own sandbox): a Domain
	// Anchor of its own (hash, container, clone, agent branch, Trust
	// Anchor) beside its parent's (ForAttempt).
	Attempt    string
	Hash       string
	DataRoot   string // Storage Root
	RuntimeDir string // per-user runtime dir ($XDG_RUNTIME_DIR/lazaret)
	SocketDir  string // escalation socket_dir
}

// New returns the Anchor of profile and workspace. The workspace is
// canonicalized here; it must exist.
func New(profile, workspace, dataRoot, runtimeDir, socketDir string) (*Anchor, error) {
	ws, err := Canonical(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	if socketDir == "" {
		socketDir = runtimeDir
	}
	return &Anchor{
		Profile:    profile,
		Workspace:  ws,
		Hash:       Hash(profile, ws),
		DataRoot:   dataRoot,
		RuntimeDir: runtimeDir,
		SocketDir:  socketDir,
	}, nil
}

// AttemptHash is the Domain Anchor of attempt name of (profile,
// workspace): the workspace's hash input with the name after a NUL, a
// byte no path holds, so no workspace's own hash is an attempt's.
func AttemptHash(profile, canonicalWorkspace, name string) string {
	return Hash(profile, canonicalWorkspace+"\x00attempt\x00"+name)
}

// ForAttempt returns the Anchor of attempt name of a's profile and
// workspace (name checked by ValidAttemptName first).
func (a *Anchor) ForAttempt(name string) (*Anchor, error) {
	if err := ValidAttemptName(name); err != nil {
		return nil, err
	}
	b := *a
	b.Attempt = name
	b.Hash = AttemptHash(a.Profile, a.Workspace, name)
	return &b, nil
}

// Parent is the workspace's own Anchor of an attempt's (a itself when a
// is no attempt).
func (a *Anchor) Parent() *Anchor {
	if a.Attempt == "" {
		return a
	}
	b := *a
	b.Attempt = ""
	b.Hash = Hash(a.Profile, a.Workspace)
	return &b
}

// MaxAttemptName bounds an attempt's name (it goes into the agent branch
// and the container's name).
const MaxAttemptName = 32

// ValidAttemptName accepts lower-case letters, digits and '-' inside,
// beginning with a letter or digit: a name that is a valid git ref
// component and a container name's part, and shows on a terminal as is.
func ValidAttemptName(name string) error {
	if name == "" || len(name) > MaxAttemptName {
		return fmt.Errorf("attempt name %q: want 1 to %d characters", name, MaxAttemptName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1:
		default:
			return fmt.Errorf("attempt name %q: only a-z, 0-9 and '-' inside (not first or last) are allowed", name)
		}
	}
	return nil
}

// AgentKey is what names the agent's refs of a domain: the profile, or
// <profile>.<attempt> for an attempt. The '.' is outside the profile
// alphabet, so no profile's key is another profile's attempt's (with
// '-', profile a-b and attempt b of profile a would share a branch).
func AgentKey(profile, attempt string) string {
	if attempt == "" {
		return profile
	}
	return profile + "." + attempt
}

// DomainsDirName is the directory of the data_root that holds every
// Domain Root. It shares the data_root with the profile directories
// (<data_root>/<profile>), so it is the one profile name the rule
// ^[a-z0-9_-]{2,32}$ admits that is reserved (ReservedProfile).
const DomainsDirName = "domains"

// ReservedProfile reports whether name, which the profile rule admits, is
// nevertheless not a profile name: its profile directory would be the
// data_root's directory of Domain Roots.
func ReservedProfile(name string) bool { return name == DomainsDirName }

// DomainsDir is <data_root>/domains, the parent of every Domain Root.
func (a *Anchor) DomainsDir() string { return filepath.Join(a.DataRoot, DomainsDirName) }

// Root is the Domain Root, <data_root>/domains/<hash>.
func (a *Anchor) Root() string { return filepath.Join(a.DomainsDir(), a.Hash) }

// ProfileDir is {profile_dir}, <data_root>/<profile>.
func (a *Anchor) ProfileDir() string { return filepath.Join(a.DataRoot, a.Profile) }

// StateDB is the bbolt state store.
func (a *Anchor) StateDB() string { return filepath.Join(a.Root(), "state.db") }

// CoordinatorLog is where the detached coordinator writes its log.
func (a *Anchor) CoordinatorLog() string { return filepath.Join(a.Root(), "coordinator.log") }

// OverlayDir is the State Anchor base for the container directory dir:
// /usr gives <root>/overlay/usr.
func (a *Anchor) OverlayDir(dir string) string {
	return filepath.Join(a.Root(), "overlay", OverlayName(dir))
}

// OverlayName flattens a container directory into one path element:
// /usr → usr, /var/lib → var_lib.
func OverlayName(dir string) string {
	return strings.ReplaceAll(strings.Trim(filepath.Clean(dir), "/"), "/", "_")
}

// OverlayPaths returns the changes, work and merged directories of dir
// (for /usr: usr_changes, usr_work, usr_merged).
func (a *Anchor) OverlayPaths(dir string) (changes, work, merged string) {
	base, name := a.OverlayDir(dir), OverlayName(dir)
	return filepath.Join(base, name+"_changes"), filepath.Join(base, name+"_work"), filepath.Join(base, name+"_merged")
}

// AgentClone is the branch-mode agent clone.
func (a *Anchor) AgentClone() string { return filepath.Join(a.Root(), "workspace") }

// LockFile is the hold-to-bind lock (per-user runtime dir, never unlinked).
func (a *Anchor) LockFile() string {
	return filepath.Join(a.RuntimeDir, "lazaret_coord_"+a.Hash+".lock")
}

// ControlSocket is the coordinator's control socket.
func (a *Anchor) ControlSocket() string {
	return filepath.Join(a.RuntimeDir, "coord-"+a.Hash+".sock")
}

// TLSDir holds the sandbox's client certificate (tmpfs-backed runtime dir).
func (a *Anchor) TLSDir() string { return filepath.Join(a.RuntimeDir, "tls-"+a.Hash) }

// CABundleSnapshot is the copy of the profile's host CA bundle the
// sandbox mounts (certificates only, taken at each start); it goes with
// the sandbox.
func (a *Anchor) CABundleSnapshot() string { return filepath.Join(a.RuntimeDir, "ca-"+a.Hash+".crt") }

// InjectBundle is the trust store of a sandbox with secrets: the profile's
// host CA bundle and the sandbox's interception CA (docs/SECRETS.md),
// written at each start; it goes with the sandbox too.
func (a *Anchor) InjectBundle() string {
	return filepath.Join(a.RuntimeDir, "ca-inject-"+a.Hash+".crt")
}

// EscalationSocket is the mTLS socket bound into the sandbox.
func (a *Anchor) EscalationSocket() string { return filepath.Join(a.SocketDir, a.Hash+".sock") }

// NetdSocket is the control socket of the network sidecar.
func (a *Anchor) NetdSocket() string { return filepath.Join(a.RuntimeDir, "netd-"+a.Hash+".sock") }

// GateSocket is the coordinator's start gate (internal/engine/startgate): the
// runsc shim holds the agent container's create there.
func (a *Anchor) GateSocket() string { return filepath.Join(a.RuntimeDir, "gate-"+a.Hash+".sock") }

// Netns is where the sandbox's network namespace is pinned (a bind mount
// in podman's mount namespace; an empty file on the host).
func (a *Anchor) Netns() string { return filepath.Join(a.RuntimeDir, "netns-"+a.Hash) }

// RuntimeSockets are the UNIX sockets the domain's coordinator and its
// components bind: what a dead coordinator leaves behind.
func (a *Anchor) RuntimeSockets() []string {
	return []string{a.ControlSocket(), a.NetdSocket(), a.EscalationSocket(), a.GateSocket()}
}

// Container is the agent sandbox container name.
func (a *Anchor) Container() string { return "lazaret-" + a.Profile + "-" + a.Hash }

// Sidecar is the network sidecar container name, lazaret-netd.<hash>.
// The '.' is outside the profile alphabet, so no profile's Container can
// be named so (it was lazaret-net-<hash>, which is profile
// net's Container: its own sidecar's name). A sidecar left under that
// old name is still removed by its domain label (lazaret stop, crash
// recovery), never by name.
func (a *Anchor) Sidecar() string { return SidecarPrefix + a.Hash }

// SidecarPrefix is what the network sidecar's name starts with.
const SidecarPrefix = "lazaret-netd."

// SandboxWorkspace is where the workspace (or the agent clone) is mounted
// in the sandbox.
const SandboxWorkspace = "/workspace"

// LabelKey is the podman label every container of a domain carries.
const LabelKey = "lazaret.domain"

// LabelSpare marks a spare network sidecar, one started for the domain's
// next sandbox before it starts; its value is the data_root, which scopes
// `lazaret stop --all`. A claimed spare keeps it.
const LabelSpare = "lazaret.spare"

// LabelDataRoot is the podman label naming the data_root of an agent
// container's configuration: it scopes `lazaret stop --all`.
const LabelDataRoot = "lazaret.data_root"

// AgentBranch is the branch the agent works on in branch mode.
func (a *Anchor) AgentBranch() string { return "lazaret/agent-" + AgentKey(a.Profile, a.Attempt) }

// AttemptRecord is the record of an attempt's origin in its Domain Root
// (internal/engine/attempt reads and writes it).
func (a *Anchor) AttemptRecord() string { return filepath.Join(a.Root(), "attempt.json") }

// Resource is one row of the resource table, for `lazaret domain`.
type Resource struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Resources lists every host resource of the domain in a stable order.
func (a *Anchor) Resources() []Resource {
	return []Resource{
		{"domain_root", a.Root()},
		{"state_db", a.StateDB()},
		{"coordinator_log", a.CoordinatorLog()},
		{"overlay_root", filepath.Join(a.Root(), "overlay")},
		{"agent_clone", a.AgentClone()},
		{"runtime_dir", a.RuntimeDir},
		{"lock_file", a.LockFile()},
		{"control_socket", a.ControlSocket()},
		{"tls_dir", a.TLSDir()},
		{"ca_bundle_snapshot", a.CABundleSnapshot()},
		{"inject_bundle", a.InjectBundle()},
		{"escalation_socket", a.EscalationSocket()},
		{"netd_socket", a.NetdSocket()},
		{"netns", a.Netns()},
		{"container", a.Container()},
		{"sidecar", a.Sidecar()},
		{"label", LabelKey + "=" + a.Hash},
		{"agent_branch", a.AgentBranch()},
		{"attempt", a.Attempt},
	}
}

// KeeperDir is where the session keepers of this user's kept sessions
// (`lazaret attach`) put their sockets and info files: a directory of the
// runtime directory, made 0700 by its first keeper.
func KeeperDir(runtimeDir string) string { return filepath.Join(runtimeDir, "keep") }

// KubeSessionDir holds a control socket per running lazaret-kube session
// (a cluster session's pending approvals, its events): a directory of
// the runtime directory, made 0700 by its first session.
func KubeSessionDir(runtimeDir string) string { return filepath.Join(runtimeDir, "kube") }

// KubeSessionSocket is the control socket of the lazaret-kube session id
// ("*" gives the pattern of them all).
func KubeSessionSocket(runtimeDir, id string) string {
	return filepath.Join(KubeSessionDir(runtimeDir), "session-"+id+".sock")
}

// KubeResumeDir holds a record and a lock per kept cluster session of
// this domain, which a new lazaret-kube takes back when the one that ran
// it died (internal/kubecli/resume.go): in the Domain Root, which a
// reboot keeps.
func (a *Anchor) KubeResumeDir() string { return filepath.Join(a.Root(), kubeResumeDirName) }

// KubeResumeRecords is the pattern of every domain's kept cluster
// session records under dataRoot.
func KubeResumeRecords(dataRoot string) string {
	return filepath.Join(dataRoot, DomainsDirName, "*", kubeResumeDirName, "*.json")
}

const kubeResumeDirName = "kube-sessions"

// RuntimeDir returns the per-user runtime directory: $XDG_RUNTIME_DIR/lazaret,
// else /tmp/lazaret-<uid>. It is created 0700 and its owner is checked, so a
// directory planted by another user in a shared /tmp is refused.
func RuntimeDir() (string, error) {
	base := os.Getenv("XDG_RUNTIME_DIR")
	var dir string
	if base != "" {
		dir = filepath.Join(base, "lazaret")
	} else {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("lazaret-%d", os.Getuid()))
	}
	if err := EnsurePrivateDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// EnsurePrivateDir creates dir (and parents) with mode 0700 if missing and
// checks that the final directory is a real directory, not a symlink, owned
// by the current user and not accessible to others.
func EnsurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory (symlink?)", dir)
	}
	if err := checkOwner(dir, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("%s: mode %v and cannot chmod 0700: %w", dir, fi.Mode().Perm(), err)
		}
	}
	return nil
}
