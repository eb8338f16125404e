package podman

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ContainerInfo is the part of `podman container inspect` lazaret uses.
type ContainerInfo struct {
	ID          string         `json:"Id"`
	Name        string         `json:"Name"`
	Created     time.Time      `json:"Created"`
	State       ContainerState `json:"State"`
	Image       string         `json:"Image"` // image ID
	ImageName   string         `json:"ImageName"`
	ImageDigest string         `json:"ImageDigest"`
	OCIRuntime  string         `json:"OCIRuntime"`
	Config      struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	Mounts []struct {
		Destination string `json:"Destination"`
	} `json:"Mounts"`
	// GraphDriver's Data names the container's layers on the host
	// ("UpperDir": where its writes to the image's files land).
	GraphDriver struct {
		Data map[string]string `json:"Data"`
	} `json:"GraphDriver"`
}

// HasMount reports whether the container mounts something at dest.
func (i *ContainerInfo) HasMount(dest string) bool {
	for _, m := range i.Mounts {
		if m.Destination == dest {
			return true
		}
	}
	return false
}

// ContainerState is the State object of an inspect.
type ContainerState struct {
	Status    string    `json:"Status"` // "running", "exited", "created", ...
	Running   bool      `json:"Running"`
	Pid       int       `json:"Pid"`
	ConmonPid int       `json:"ConmonPid"`
	ExitCode  int       `json:"ExitCode"`
	StartedAt time.Time `json:"StartedAt"`
}

// ContainerSummary is one entry of `podman ps --format json`.
type ContainerSummary struct {
	ID      string            `json:"Id"`
	Names   []string          `json:"Names"`
	Image   string            `json:"Image"`
	State   string            `json:"State"`
	Labels  map[string]string `json:"Labels"`
	Pid     int               `json:"Pid"`
	Created int64             `json:"Created"` // Unix seconds
}

// Name is the container's first name.
func (s ContainerSummary) Name() string {
	if len(s.Names) == 0 {
		return ""
	}
	return s.Names[0]
}

// InspectContainer returns the container nameOrID. A missing container is
// an error wrapping ErrNoSuchContainer.
func (c *Client) InspectContainer(ctx context.Context, nameOrID string) (*ContainerInfo, error) {
	out, err := c.outputArgs(ctx, "container", "inspect", "--format", "json", nameOrID)
	if err != nil {
		return nil, err
	}
	return decodeContainerInspect(out, nameOrID)
}

func decodeContainerInspect(out []byte, nameOrID string) (*ContainerInfo, error) {
	var infos []ContainerInfo
	if err := json.Unmarshal(out, &infos); err != nil {
		return nil, fmt.Errorf("podman container inspect %s: decoding: %w", nameOrID, err)
	}
	if len(infos) != 1 {
		return nil, fmt.Errorf("podman container inspect %s: %d results: %w", nameOrID, len(infos), ErrNoSuchContainer)
	}
	return &infos[0], nil
}

// ContainerExists reports whether a container nameOrID exists (in any state).
func (c *Client) ContainerExists(ctx context.Context, nameOrID string) (bool, error) {
	err := c.run(ctx, "container", "exists", nameOrID)
	var pe *Error
	if errors.As(err, &pe) && pe.ExitCode == 1 {
		return false, nil
	}
	return err == nil, err
}

// ListByLabel returns every container (running or not) whose label key
// has value; an empty value matches any value of key.
func (c *Client) ListByLabel(ctx context.Context, key, value string) ([]ContainerSummary, error) {
	filter := "label=" + key
	if value != "" {
		filter += "=" + value
	}
	out, err := c.outputArgs(ctx, "ps", "-a", "--filter", filter, "--format", "json")
	if err != nil {
		return nil, err
	}
	return decodePS(out)
}

func decodePS(out []byte) ([]ContainerSummary, error) {
	var list []ContainerSummary
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("podman ps: decoding: %w", err)
	}
	return list, nil
}

// RunDetached creates and starts spec (see RunArgs) and returns the new
// container's ID. The image must already be in local storage: lazaret
// never pulls at start (ErrNoSuchImage tells the user to build it).
func (c *Client) RunDetached(ctx context.Context, spec *ContainerSpec) (string, error) {
	inv, err := c.RunArgs(spec)
	if err != nil {
		return "", err
	}
	// --pull=never goes right after "run" so it precedes the image.
	inv.Args = append([]string{inv.Args[0], "--pull=never"}, inv.Args[1:]...)
	out, err := c.OutputInvocation(ctx, inv)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(id, '\n'); i >= 0 { // warnings before the ID
		id = id[i+1:]
	}
	return id, nil
}

// StopContainer stops nameOrID, waiting timeout for its processes to exit
// after SIGTERM before killing them. A missing container is not an error.
func (c *Client) StopContainer(ctx context.Context, nameOrID string, timeout time.Duration) error {
	err := c.run(ctx, "stop", "--time", seconds(timeout), nameOrID)
	if errors.Is(err, ErrNoSuchContainer) {
		return nil
	}
	return err
}

// RemoveContainer force-removes nameOrID, stopping it first with timeout
// (SIGTERM, then SIGKILL), together with the containers that depend on it
// (an agent container joined to a sidecar's network namespace blocks the
// sidecar's removal otherwise). A missing container is not an error.
func (c *Client) RemoveContainer(ctx context.Context, nameOrID string, timeout time.Duration) error {
	err := c.run(ctx, "rm", "--force", "--depend", "--time", seconds(timeout), nameOrID)
	if errors.Is(err, ErrNoSuchContainer) {
		return nil
	}
	return err
}

// RemoveLabelled removes, one at a time, every container labelled
// key=value (removing a sidecar also removes the agent container joined to
// it, which is then already gone) and returns them.
func (c *Client) RemoveLabelled(ctx context.Context, key, value string) ([]ContainerSummary, error) {
	list, err := c.ListByLabel(ctx, key, value)
	if err != nil {
		return nil, err
	}
	for _, ctr := range list {
		c.logger().Info("removing leftover container", "name", ctr.Name(), "id", ctr.ID)
		if err := c.RemoveContainer(ctx, ctr.ID, 0); err != nil {
			return nil, err
		}
	}
	return list, nil
}

func seconds(d time.Duration) string {
	s := int((d + time.Second - 1) / time.Second)
	return strconv.Itoa(max(s, 0))
}

// ExecOptions describe a command to run in a running container.
type ExecOptions struct {
	Container   string
	Interactive bool // -i: keep stdin open
	TTY         bool // -t: allocate a terminal
	Detach      bool // -d: leave the command running in the container
	Env         map[string]string
	Workdir     string
	User        string
	Command     []string
	// PreserveFDs passes podman's descriptors 3..PreserveFDs+2 to the
	// command (the extra files given to Client.Cmd).
	PreserveFDs int
	// Privileged gives the command every capability (podman exec
	// --privileged): only for the isolating session holder, which keeps
	// none but the container's for the command it runs.
	Privileged bool
}

// ExecArgs returns the `podman exec` for o (run it with Client.Cmd; the
// environment travels beside the argv, see Invocation). The command's
// exit code becomes podman's, except that 125 means podman itself failed
// (see Error).
func ExecArgs(o ExecOptions) (*Invocation, error) {
	if o.Container == "" {
		return nil, fmt.Errorf("exec: no container")
	}
	if len(o.Command) == 0 {
		return nil, fmt.Errorf("exec: no command")
	}
	if err := ValidateEnv(o.Env); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	args := []string{"exec"}
	if o.Detach {
		args = append(args, "-d")
	}
	if o.Interactive {
		args = append(args, "-i")
	}
	if o.TTY {
		args = append(args, "-t")
	}
	if o.Workdir != "" {
		args = append(args, "--workdir", o.Workdir)
	}
	if o.User != "" {
		args = append(args, "--user", o.User)
	}
	if o.PreserveFDs > 0 {
		args = append(args, "--preserve-fds", strconv.Itoa(o.PreserveFDs))
	}
	if o.Privileged {
		args = append(args, "--privileged")
	}
	// The container name ends podman's options: the command's own
	// arguments follow and are never read as podman flags.
	args = append(args, o.Container)
	return &Invocation{Args: append(args, o.Command...), Env: o.Env}, nil
}
