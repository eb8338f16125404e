package podman

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/execx"
)

// ExecCmd returns the unstarted `podman exec` of o, for a caller that wires
// the command's streams itself (a PTY, a long-lived pipe). A non-zero exit
// of Wait is podman's or the command's; see Error for telling them apart.
func (c *Client) ExecCmd(ctx context.Context, o ExecOptions) (*exec.Cmd, error) {
	inv, err := ExecArgs(o)
	if err != nil {
		return nil, err
	}
	return c.Cmd(ctx, inv)
}

// ExecDetached starts argv in the running container and returns once
// podman has started it (podman exec -d).
func (c *Client) ExecDetached(ctx context.Context, container string, argv ...string) error {
	inv, err := ExecArgs(ExecOptions{Container: container, Detach: true, Command: argv})
	if err != nil {
		return err
	}
	_, err = c.OutputInvocation(ctx, inv)
	return err
}

// ExecOutput runs argv in the running container and returns its stdout.
func (c *Client) ExecOutput(ctx context.Context, container string, argv ...string) ([]byte, error) {
	inv, err := ExecArgs(ExecOptions{Container: container, Command: argv})
	if err != nil {
		return nil, err
	}
	return c.OutputInvocation(ctx, inv)
}

// Logs returns what the container nameOrID wrote to its standard output.
func (c *Client) Logs(ctx context.Context, nameOrID string) ([]byte, error) {
	return c.outputArgs(ctx, "logs", nameOrID)
}

// Info is the part of `podman info` lazaret uses.
type Info struct {
	Version struct {
		Version string `json:"Version"`
	} `json:"version"`
	Store struct {
		GraphDriverName string `json:"graphDriverName"`
	} `json:"store"`
	Host struct {
		Security struct {
			Rootless bool `json:"rootless"`
		} `json:"security"`
	} `json:"host"`
}

// Info returns podman's view of the host and its storage.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	out, err := c.outputArgs(ctx, "info", "--format", "json")
	if err != nil {
		return nil, err
	}
	return decodeInfo(out)
}

func decodeInfo(out []byte) (*Info, error) {
	var info Info
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, fmt.Errorf("podman info: cannot decode: %w (%w)", err, ErrBadOutput)
	}
	return &info, nil
}

// ImageRefs returns the "repository:tag" of every local image matching
// reference (podman's reference filter).
func (c *Client) ImageRefs(ctx context.Context, reference string) ([]string, error) {
	out, err := c.outputArgs(ctx, "images", "--format", "{{.Repository}}:{{.Tag}}", "--filter", "reference="+reference)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// RemoveUnusedImage removes the tag ref (the image with it when it was the
// last one); podman refuses while a container uses the image.
func (c *Client) RemoveUnusedImage(ctx context.Context, ref string) error {
	return c.run(ctx, "image", "rm", ref)
}

// PruneDanglingImages removes the untagged images carrying label (a
// "key=value" filter).
func (c *Client) PruneDanglingImages(ctx context.Context, label string) error {
	return c.run(ctx, "image", "prune", "--force", "--filter", "label="+label)
}

// BuildOptions describe an image build. It never uses the network and
// never pulls.
type BuildOptions struct {
	ContextDir    string
	Containerfile string
	Tag           string
	// NoLayers builds one layer (--layers=false): no intermediate images
	// are cached.
	NoLayers bool
	// Progress receives podman's output; nil discards it.
	Progress io.Writer
}

func buildArgs(o BuildOptions) []string {
	args := []string{"build", "--network", "none", "--pull=never"}
	if o.NoLayers {
		args = append(args, "--layers=false")
	}
	return append(args, "--tag", o.Tag, "--file", o.Containerfile, o.ContextDir)
}

// BuildImage builds o.Containerfile in o.ContextDir as o.Tag.
func (c *Client) BuildImage(ctx context.Context, o BuildOptions) error {
	args := buildArgs(o)
	cmd := c.command(ctx, args...)
	var stderr execx.TailBuffer
	cmd.Stderr = &stderr
	if o.Progress != nil {
		cmd.Stdout = o.Progress
		cmd.Stderr = io.MultiWriter(o.Progress, &stderr)
	}
	return c.wrap(args, cmd.Run(), stderr.String())
}
