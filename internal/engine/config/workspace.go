package config

import (
	"fmt"
	"os"
	"path/filepath"
)

// WorkspaceError is a directory refused as an Agent Workspace. It is a
// security error (exit code 5); the CLI adds the way out.
type WorkspaceError struct {
	Dir string
	Why string
}

func (e *WorkspaceError) Error() string {
	return fmt.Sprintf("workspace %s %s", oneLine(e.Dir), e.Why)
}

// homeCredentialDirs are directories of the home directory whose contents
// act for the user (keys, tokens, start-up programs, other programs'
// configuration, executables on PATH). A workspace may not be one of them,
// contain one, or lie inside one.
var homeCredentialDirs = []string{".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".password-store", ".pki", ".local/bin"}

// homeStateDirs hold configuration and data of many programs (~/.config
// has git's, the shell's and podman's; ~/.local/share and ~/.cache hold
// what other programs load). A workspace may not be one or contain one; a
// project kept inside one (a dotfiles repository of one program) is that
// user's choice.
var homeStateDirs = []string{".config", ".local", ".local/share", ".cache"}

// systemDirs may never be a workspace nor hold one: the system's own
// programs and configuration.
var systemDirs = []string{"/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sys", "/dev"}

// sharedParents may hold workspaces but never be one: each holds far more
// than a project (every user's home, every package, shared temporary files
// and sockets).
var sharedParents = []string{"/home", "/root", "/var", "/var/tmp", "/tmp", "/opt", "/srv", "/mnt", "/media"}

// CheckWorkspace refuses a canonical workspace directory that would hand
// the sandbox far more than a project — in direct mode the agent writes
// it, in branch mode it is cloned and reviewed there. Refused, each with
// its reason (docs/CONFIG.md, "Workspace"): the host root and any
// directory containing the home directory; the home directory itself;
// system directories and anything in them; shared parents such as /tmp or
// /home themselves; a directory that is, contains or lies in the data
// root, the runtime directory (sockets), lazaret's configuration
// directory, or a credential directory of home (~/.ssh, ~/.gnupg, …); one
// that is or contains ~/.config, ~/.local or ~/.cache; one that contains
// the configuration file in use; and a path that would inject mount
// options.
func (c *Config) CheckWorkspace(ws string) error {
	if err := checkPathChars(ws); err != nil {
		return locate(WorkspaceKey, err)
	}
	if why := newHostGuard(c.DataRoot, c.File).workspaceRefusal(ws); why != "" {
		return &WorkspaceError{Dir: ws, Why: why}
	}
	return nil
}

// workspaceRefusal returns why ws may not be a workspace, or "".
func (g *hostGuard) workspaceRefusal(ws string) string {
	switch {
	case ws == "/":
		return "is the host root /"
	case g.home != "" && ws == g.home:
		return "is your home directory (shell start-up files, credentials, lazaret's configuration)"
	case g.home != "" && within(g.home, ws):
		return fmt.Sprintf("contains your home directory %s", g.home)
	}
	for _, d := range systemDirs {
		if within(ws, d) {
			return fmt.Sprintf("is in the system directory %s", d)
		}
	}
	for _, d := range sharedParents {
		if c, err := canonicalize(d); err == nil && ws == c {
			return "is a shared directory holding far more than one project"
		}
	}
	type area struct{ dir, what string }
	inside := []area{{g.dataRoot, "lazaret's data_root (other sandboxes' state)"}, {g.configDir, "lazaret's configuration directory"}}
	for _, r := range g.runtime {
		inside = append(inside, area{r, "the runtime directory (podman's and lazaret's sockets)"})
	}
	for _, d := range g.homeDirs(homeCredentialDirs) {
		inside = append(inside, area{d, "a credential directory of your home"})
	}
	for _, a := range inside {
		if a.dir != "" && (within(ws, a.dir) || within(a.dir, ws)) {
			return fmt.Sprintf("is, contains or is inside %s %s", a.what, a.dir)
		}
	}
	for _, d := range append(g.homeDirs(homeStateDirs), xdgDirs()...) {
		if within(d, ws) {
			return fmt.Sprintf("is or contains %s (configuration and data of other programs)", d)
		}
	}
	for _, f := range g.configFiles {
		if within(f, ws) {
			return fmt.Sprintf("contains lazaret's configuration file %s (the agent could grant itself mounts and auto-approved host commands)", f)
		}
	}
	return ""
}

// homeDirs returns the canonical paths of rel under the home directory.
func (g *hostGuard) homeDirs(rel []string) []string {
	var out []string
	for _, r := range rel {
		if g.home == "" {
			break
		}
		if c, err := canonicalize(filepath.Join(g.home, r)); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// xdgDirs are $XDG_CONFIG_HOME, $XDG_DATA_HOME and $XDG_CACHE_HOME when
// set: the same kind of directories as ~/.config, wherever they are.
func xdgDirs() []string {
	var out []string
	for _, v := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"} {
		if x := os.Getenv(v); filepath.IsAbs(x) {
			if c, err := canonicalize(filepath.Clean(x)); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
