package config

import (
	"os"
	"path/filepath"
)

// hostGuard knows which host paths must never be mounted into a sandbox.
// All its paths are canonical.
type hostGuard struct {
	dataRoot string
	home     string
	// runtime are directories full of sockets (podman's API, the session
	// bus, lazaret's own control sockets): mounting any of them is an escape.
	runtime []string
	// configFiles are the configuration files (the default one and the one
	// loaded): a sandbox that could write one could grant itself mounts
	// and auto-approved host commands. configDir is the default
	// configuration directory, lazaret's alone.
	configFiles []string
	configDir   string
}

// newHostGuard returns the guard for a configuration read from file
// (empty for built-in defaults) with the canonical dataRoot.
func newHostGuard(dataRoot, file string) *hostGuard {
	g := &hostGuard{dataRoot: dataRoot}
	if h, err := homeDir(); err == nil && filepath.IsAbs(h) {
		if c, err := canonicalize(filepath.Clean(h)); err == nil {
			g.home = c
		}
	}
	files := []string{}
	if def, err := DefaultPath(); err == nil {
		files = append(files, def)
		if c, err := canonicalize(filepath.Dir(def)); err == nil {
			g.configDir = c
		}
	}
	if file != "" {
		if abs, err := filepath.Abs(file); err == nil {
			files = append(files, abs)
		}
	}
	for _, f := range files {
		if c, err := canonicalize(filepath.Clean(f)); err == nil {
			g.configFiles = append(g.configFiles, c)
		}
	}
	dirs := []string{"/run", RuntimeDirPath()}
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		dirs = append(dirs, x)
	}
	for _, d := range dirs {
		if c, err := canonicalize(filepath.Clean(d)); err == nil {
			g.runtime = append(g.runtime, c)
		}
	}
	return g
}

// kernelDirs hold kernel and device interfaces, never a mount source or
// a place for lazaret's state.
var kernelDirs = []string{"/proc", "/sys", "/dev"}

// checkSystemPath refuses the host root and kernel filesystems; it applies
// to every host path of the configuration (data_root, socket_dir, volumes).
func checkSystemPath(p string) error {
	if p == "/" {
		return securityErrf("is the host root /")
	}
	for _, k := range kernelDirs {
		if within(p, k) {
			return securityErrf("%s is under %s", quoteValue(p), k)
		}
	}
	return nil
}

// checkMountSource refuses a canonical volume host path that would expose
// the host: the root, kernel filesystems, runtime socket directories, and
// any directory containing the Storage Root or the home directory (both
// hold other domains' state or the user's credentials).
func (g *hostGuard) checkMountSource(p string) error {
	if err := checkSystemPath(p); err != nil {
		return err
	}
	for _, r := range g.runtime {
		if within(p, r) {
			return securityErrf("%s is under the runtime directory %s (podman, session bus and lazaret sockets)", quoteValue(p), r)
		}
	}
	if g.dataRoot != "" && within(g.dataRoot, p) {
		return securityErrf("%s contains lazaret's data_root %s", quoteValue(p), g.dataRoot)
	}
	if profileOverlayRoot(g.dataRoot, p) {
		return securityErrf("%s is or holds a profile's State Anchor under %s", quoteValue(p), g.dataRoot)
	}
	if g.home != "" && within(g.home, p) {
		return securityErrf("%s contains the home directory %s", quoteValue(p), g.home)
	}
	for _, f := range g.configFiles {
		if within(f, p) {
			return securityErrf("%s contains lazaret's configuration file %s", quoteValue(p), f)
		}
	}
	if g.configDir != "" && within(p, g.configDir) {
		return securityErrf("%s is in lazaret's configuration directory %s", quoteValue(p), g.configDir)
	}
	return nil
}

// checkDomainMountSource adds the checks that need a concrete domain: the
// workspace (mounted by the Git Sentry layout, whose .git must stay
// read-only) and the Domain Root's own state (store, audit log, agent
// clone, overlays) must not be reachable through a second mount.
func (g *hostGuard) checkDomainMountSource(p string, t Tokens) error {
	if err := g.checkMountSource(p); err != nil {
		return err
	}
	if ws := t.WorkspaceDir; ws != "" {
		if within(ws, p) {
			return securityErrf("%s contains the workspace %s (it is mounted at /workspace)", quoteValue(p), ws)
		}
		if within(p, filepath.Join(ws, ".git")) {
			return securityErrf("%s is the workspace's .git, which the sandbox may never write", quoteValue(p))
		}
	}
	a := t.anchor()
	if within(a.Root(), p) {
		return securityErrf("%s contains the Domain Root %s", quoteValue(p), a.Root())
	}
	for _, reserved := range []string{a.StateDB(), a.CoordinatorLog(), a.AgentClone(), filepath.Join(a.Root(), "overlay")} {
		if within(p, reserved) {
			return securityErrf("%s is lazaret's own state %s", quoteValue(p), reserved)
		}
	}
	return nil
}
