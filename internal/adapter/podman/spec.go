package podman

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Mount is one container mount.
type Mount struct {
	// Type is "bind" or "tmpfs".
	Type     string
	Source   string // host path (bind only)
	Target   string // container path
	ReadOnly bool
	// Options are extra mount options (for example "z", "nosuid", "size=16m").
	Options []string
}

func (m Mount) arg() string {
	parts := []string{"type=" + m.Type}
	if m.Type == "bind" {
		parts = append(parts, "source="+m.Source)
	}
	parts = append(parts, "destination="+m.Target)
	switch {
	case m.ReadOnly && m.Type == "tmpfs":
		parts = append(parts, "ro") // podman refuses readonly= for a tmpfs
	case m.ReadOnly:
		parts = append(parts, "readonly=true")
	}
	for _, o := range m.Options {
		switch o {
		case "z", "Z":
			parts = append(parts, "relabel=shared")
			if o == "Z" {
				parts[len(parts)-1] = "relabel=private"
			}
		default:
			parts = append(parts, o)
		}
	}
	return strings.Join(parts, ",")
}

// ContainerSpec describes a container to create with `podman run -d`.
type ContainerSpec struct {
	Name        string
	Image       string
	Runtime     string // overrides Client.Runtime when set
	Labels      map[string]string
	Annotations map[string]string
	Env         map[string]string
	Mounts      []Mount
	// Network is passed to --network ("none", "container:<name>", ...).
	Network     string
	CapDrop     []string
	CapAdd      []string
	SecurityOpt []string
	PidsLimit   int
	Hostname    string
	Workdir     string
	User        string
	// DNS, when set, are the nameservers podman writes to resolv.conf.
	DNS []string
	// ExtraArgs are appended before the image (for flags without a field).
	ExtraArgs []string
	// Command is the container's entry command (after the image).
	Command []string
}

// RunArgs returns the `podman run` that creates and starts spec detached,
// replacing any leftover container of the same name. Run it with
// Client.Cmd: the environment travels beside the argv (see Invocation).
func (c *Client) RunArgs(spec *ContainerSpec) (*Invocation, error) {
	if spec.Name == "" || spec.Image == "" {
		return nil, fmt.Errorf("container spec needs a name and an image")
	}
	if err := ValidateEnv(spec.Env); err != nil {
		return nil, fmt.Errorf("container %s: %w", spec.Name, err)
	}
	args := []string{"run", "-d", "--replace", "--name", spec.Name}
	if rt := cmpOr(spec.Runtime, c.Runtime); rt != "" {
		args = append(args, "--runtime", rt)
	}
	for _, k := range sortedKeys(spec.Labels) {
		args = append(args, "--label", k+"="+spec.Labels[k])
	}
	for _, k := range sortedKeys(spec.Annotations) {
		args = append(args, "--annotation", k+"="+spec.Annotations[k])
	}
	for _, m := range spec.Mounts {
		if m.Type != "bind" && m.Type != "tmpfs" {
			return nil, fmt.Errorf("mount %s: unknown type %q", m.Target, m.Type)
		}
		args = append(args, "--mount", m.arg())
	}
	if spec.Network != "" {
		args = append(args, "--network", spec.Network)
	}
	for _, cap := range spec.CapDrop {
		args = append(args, "--cap-drop", cap)
	}
	for _, cap := range spec.CapAdd {
		args = append(args, "--cap-add", cap)
	}
	for _, o := range spec.SecurityOpt {
		args = append(args, "--security-opt", o)
	}
	if spec.PidsLimit > 0 {
		args = append(args, "--pids-limit", strconv.Itoa(spec.PidsLimit))
	}
	if spec.Hostname != "" {
		args = append(args, "--hostname", spec.Hostname)
	}
	if spec.Workdir != "" {
		args = append(args, "--workdir", spec.Workdir)
	}
	if spec.User != "" {
		args = append(args, "--user", spec.User)
	}
	for _, d := range spec.DNS {
		args = append(args, "--dns", d)
	}
	args = append(args, spec.ExtraArgs...)
	args = append(args, spec.Image)
	args = append(args, spec.Command...)
	return &Invocation{Args: args, Env: spec.Env}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Clip(keys)
}
