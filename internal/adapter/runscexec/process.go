// Package runscexec runs a session's command in the running agent
// container with `runsc exec` directly instead of `podman exec`. A podman
// exec starts podman, which starts conmon, which starts runsc exec: about
// 160 ms per command on the project's VM against about 40 ms for runsc
// exec alone (docs/PERFORMANCE.md, 2026-12-03 16:00).
//
// The process runsc starts is the one podman exec would start: the user,
// groups, capabilities, no_new_privileges, environment and working
// directory come from the container's own OCI spec as runsc keeps it,
// combined the way podman 4's exec combines them (Container.Process). Its
// standard streams are pipes this process copies, or the session's PTY,
// never the caller's own descriptors (Exec.Wire): a descriptor handed to
// gVisor is operated on by the sandbox (a terminal's ioctls, a file's
// seek and truncate), where podman's conmon only ever gave it pipes.
package runscexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrUnsupported is a container or a request the direct path does not
// handle; the caller runs podman exec instead.
var ErrUnsupported = errors.New("direct runsc exec not possible")

// The OCI process fields runsc exec reads from --process (runsc's
// argsFromProcess: args, env, cwd, user, capabilities, terminal,
// noNewPrivileges); rlimits, umask and LSM labels are not applied by runsc
// exec, whichever way it is called.
type user struct {
	UID            uint32   `json:"uid"`
	GID            uint32   `json:"gid"`
	AdditionalGids []uint32 `json:"additionalGids,omitempty"`
}

type capabilities struct {
	Bounding    []string `json:"bounding"`
	Effective   []string `json:"effective"`
	Inheritable []string `json:"inheritable"`
	Permitted   []string `json:"permitted"`
	Ambient     []string `json:"ambient"`
}

type process struct {
	Terminal        bool          `json:"terminal"`
	User            user          `json:"user"`
	Args            []string      `json:"args"`
	Env             []string      `json:"env"`
	Cwd             string        `json:"cwd"`
	Capabilities    *capabilities `json:"capabilities"`
	NoNewPrivileges bool          `json:"noNewPrivileges"`
}

// state is the part of runsc's state file (<root>/<sandbox>_sandbox:<id>.state)
// read here: the container's spec as runsc runs it.
type state struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Spec   *struct {
		Process *process `json:"process"`
	} `json:"spec"`
}

// Container is a running runsc container that is its sandbox's root (the
// agent container: sandbox ID = container ID).
type Container struct {
	ID   string
	Root string // runsc's --root
	base process
}

// DefaultRoot is runsc's root for a rootless podman whose runtime
// directory is xdgRuntimeDir: runsc's own default when podman does not
// pass --root (it does not), $XDG_RUNTIME_DIR/runsc.
func DefaultRoot(xdgRuntimeDir string) string {
	if xdgRuntimeDir == "" {
		xdgRuntimeDir = fmt.Sprintf("/run/user/%d", os.Getuid())
	}
	return filepath.Join(xdgRuntimeDir, "runsc")
}

// maxState bounds the state file read (a spec of a few dozen KB).
const maxState = 4 << 20

// Load reads the container id's spec from runsc's state under root.
func Load(root, id string) (*Container, error) {
	if !isContainerID(id) {
		return nil, fmt.Errorf("%w: container ID %q is not 64 hex digits", ErrUnsupported, id)
	}
	path := filepath.Join(root, id+"_sandbox:"+id+".state")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	defer f.Close()
	var st state
	dec := json.NewDecoder(&limitReader{f: f, n: maxState})
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnsupported, path, err)
	}
	return fromState(root, id, &st)
}

func fromState(root, id string, st *state) (*Container, error) {
	switch {
	case st.ID != id:
		return nil, fmt.Errorf("%w: the state names container %q", ErrUnsupported, st.ID)
	case st.Status != "running":
		return nil, fmt.Errorf("%w: container %s is %q", ErrUnsupported, id, st.Status)
	case st.Spec == nil || st.Spec.Process == nil || st.Spec.Process.Capabilities == nil:
		return nil, fmt.Errorf("%w: container %s: no process capabilities in runsc's state", ErrUnsupported, id)
	case !hasEnv(st.Spec.Process.Env, "HOME"):
		// podman exec would look HOME up in the container's passwd.
		return nil, fmt.Errorf("%w: container %s: no HOME in its environment", ErrUnsupported, id)
	}
	return &Container{ID: id, Root: root, base: *st.Spec.Process}, nil
}

// Options is one command to run in the container.
type Options struct {
	Command []string
	// Env is added to the container's environment, a name here replacing
	// the container's value (podman exec --env).
	Env map[string]string
	// Workdir replaces the container's working directory when set.
	Workdir string
	TTY     bool
	// ExtraCaps are capabilities the process gets beyond the container's
	// (bounding, effective, permitted): the isolating session holder's,
	// which drops them before the session's command runs.
	ExtraCaps []string
}

// Process returns the OCI process for runsc exec --process: podman 4's
// exec process (libpod prepareProcessExec) for an exec without --user or
// --privileged. The user and groups are the ones podman resolved when it
// created the container (podman exec would look the container's user up
// again in the container's /etc/passwd and /etc/group, files the agent
// may rewrite; here they cannot change a later command's identity).
// Capabilities: the container's bounding set; none inheritable; a root
// user gets the bounding set as effective and permitted, any other user
// the container's effective set as effective, permitted, inheritable and
// ambient.
func (c *Container) Process(o Options) ([]byte, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("runsc exec: no command")
	}
	p := process{
		Terminal:        o.TTY,
		User:            c.base.User,
		Args:            o.Command,
		Env:             mergeEnv(c.base.Env, o.Env),
		Cwd:             c.base.Cwd,
		NoNewPrivileges: c.base.NoNewPrivileges,
	}
	if o.Workdir != "" {
		p.Cwd = o.Workdir
	}
	if !filepath.IsAbs(p.Cwd) {
		return nil, fmt.Errorf("runsc exec: working directory %q is not absolute", p.Cwd)
	}
	p.Capabilities = execCapabilities(c.base.Capabilities, c.base.User.UID)
	for _, cp := range o.ExtraCaps {
		for _, set := range []*[]string{&p.Capabilities.Bounding, &p.Capabilities.Effective, &p.Capabilities.Permitted} {
			if !slices.Contains(*set, cp) {
				*set = append(*set, cp)
			}
		}
	}
	return json.Marshal(&p)
}

func execCapabilities(ctr *capabilities, uid uint32) *capabilities {
	c := &capabilities{Bounding: clone(ctr.Bounding), Inheritable: []string{}, Ambient: clone(ctr.Ambient)}
	if uid == 0 {
		c.Effective, c.Permitted = clone(ctr.Bounding), clone(ctr.Bounding)
		return c
	}
	c.Effective, c.Permitted = clone(ctr.Effective), clone(ctr.Effective)
	c.Inheritable, c.Ambient = clone(ctr.Effective), clone(ctr.Effective)
	return c
}

func clone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// mergeEnv is base with add's values: a name already in base takes add's
// value in place, new names follow in sorted order.
func mergeEnv(base []string, add map[string]string) []string {
	out := make([]string, 0, len(base)+len(add))
	done := map[string]bool{}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := add[k]; ok {
			if done[k] {
				continue // one entry per name
			}
			kv, done[k] = k+"="+v, true
		}
		out = append(out, kv)
	}
	keys := make([]string, 0, len(add))
	for k := range add {
		if !done[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+add[k])
	}
	return out
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}

// isContainerID reports whether id is a 64-hex container ID (it becomes
// part of a path).
func isContainerID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

type limitReader struct {
	f *os.File
	n int64
}

func (l *limitReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("state file too large")
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.f.Read(b)
	l.n -= int64(n)
	return n, err
}
