// Package locate finds lazaret's companion programs (runsc, the runtime shim,
// the escalation client, the sidecar binary) from where lazaret itself is
// installed, so `make install PREFIX=…` needs no further configuration.
//
// Layout, for an install prefix P (and for the repository's bin/ directory):
//
//	P/bin/lazaret, P/bin/lazaret-runsc (the runsc shim), P/bin/lazaret-escalate (C front end),
//	P/bin/lazaret-escalate-go (Go client and broker), P/bin/lazaret-netd, P/bin/lazaret-fsmonitor,
//	P/bin/lazaret-kube (the Kubernetes backend)
//	P/lib/lazaret/runsc   (the pinned, statically built gVisor runsc)
package locate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Names of the companions.
const (
	Runsc = "runsc"
	Shim  = "lazaret-runsc"
	// Escalate is the in-sandbox lazaret-escalate: a small static C front
	// end that hands each request to the escalation broker.
	Escalate = "lazaret-escalate"
	// EscalateGo is the Go escalation client; in the sandbox it runs as
	// the broker, and the front end execs it when the broker is away.
	EscalateGo = "lazaret-escalate-go"
	Netd       = "lazaret-netd"
	// FSMonitor is the Git Sentry's git fsmonitor (daemon and hook),
	// mounted read-only into branch-mode sandboxes.
	FSMonitor = "lazaret-fsmonitor"
	// Kube is the Kubernetes backend (`lazaret --backend kubernetes`): a
	// binary of its own, so that client-go never links into lazaret.
	Kube = "lazaret-kube"
	// Lazaret is the CLI itself, which lazaret-kube runs for the
	// host-side review verbs (diff, log, merge, reset-branch).
	Lazaret = "lazaret"
)

// ErrNotFound is returned when a companion cannot be found.
var ErrNotFound = errors.New("not found")

// envOverride names the variable that overrides the lookup of each
// companion, for tests and unusual installs.
var envOverride = map[string]string{
	Runsc:      "LAZARET_RUNSC",
	Shim:       "LAZARET_SHIM",
	Escalate:   "LAZARET_ESCALATE",
	EscalateGo: "LAZARET_ESCALATE_GO",
	Netd:       "LAZARET_NETD",
	FSMonitor:  "LAZARET_FSMONITOR",
	Kube:       "LAZARET_KUBE",
	Lazaret:    "LAZARET_CLI",
}

// Find returns the absolute path of companion name. It looks, in order, at
// its LAZARET_* variable, beside the running executable, in
// <exe dir>/../lib/lazaret, in /usr/local/lib/lazaret and ~/.local/lib/lazaret
// (runsc only), then on PATH.
func Find(name string) (string, error) {
	if v := os.Getenv(envOverride[name]); v != "" {
		return checkExec(v)
	}
	var candidates []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dir := filepath.Dir(exe)
		candidates = append(candidates, filepath.Join(dir, name), filepath.Join(dir, "..", "lib", "lazaret", name))
	}
	if name == Runsc {
		candidates = append(candidates, "/usr/local/lib/lazaret/runsc")
		if home, err := os.UserHomeDir(); err == nil {
			candidates = append(candidates, filepath.Join(home, ".local", "lib", "lazaret", "runsc"))
		}
	}
	for _, c := range candidates {
		if p, err := checkExec(c); err == nil {
			return p, nil
		}
	}
	if name != Runsc { // a runsc on PATH is most likely Debian's, which is too old
		if p, err := exec.LookPath(name); err == nil {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("%s: %w (looked beside lazaret, in ../lib/lazaret and on PATH; set %s)", name, ErrNotFound, envOverride[name])
}

func checkExec(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s: not an executable file", abs)
	}
	return abs, nil
}

// Doc names a document of the repository's docs/ as the user can open it:
// the copy `make install` put beside this binary (PREFIX/share/doc/lazaret),
// else its place in the lazaret repository ("docs/NAME"). Hints name
// documents through it.
func Doc(name string) string {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "docs/" + name
	}
	return docBeside(exe, name)
}

// docBeside is Doc for the binary at exe.
func docBeside(exe, name string) string {
	p := filepath.Join(filepath.Dir(exe), "..", "share", "doc", "lazaret", name)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return filepath.Clean(p)
	}
	return "docs/" + name
}
