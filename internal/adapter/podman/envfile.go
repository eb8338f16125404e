package podman

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/pipedata"
)

// Invocation is one podman command line that may set environment
// variables in the container. Their values never appear in Args:
// /proc/PID/cmdline is readable by every local user, and profile values
// are secrets (an API key from `env:`), as are the Session Anchor's.
// Cmd hands them to podman as an --env-file on a pipe (/dev/fd/N), so
// they exist only in that pipe until podman has read them: not in an
// argv, not in podman's environment (which podman's helpers would
// inherit, and where a name like PATH or XDG_RUNTIME_DIR would change
// podman itself), and not in any file.
type Invocation struct {
	// Args is the argv after "podman", without the environment.
	Args []string
	// Env is the container's environment; validated by ValidateEnv.
	Env map[string]string
}

// maxEnvFile bounds the env file: far beyond any real environment, and
// within what a pipe can be grown to without privilege (pipe-max-size).
const maxEnvFile = pipedata.Max

// ValidateEnv checks that env can travel in an env file: names are
// portable shell names (podman's file parser trims, splits at the first
// '=' and expands a trailing '*'), and values hold no line break (the file
// is line based: a value cannot span lines).
func ValidateEnv(env map[string]string) error {
	size := 0
	for k, v := range env {
		if !validEnvName(k) {
			return fmt.Errorf("environment variable %q: invalid name (must match ^[A-Za-z_][A-Za-z0-9_]*$)", k)
		}
		if strings.ContainsAny(v, "\n\r\x00") {
			return fmt.Errorf("environment variable %s: the value contains a line break or NUL, which podman cannot take", k)
		}
		size += len(k) + len(v) + 2
	}
	if size > maxEnvFile {
		return fmt.Errorf("environment of %d bytes is too large (at most %d)", size, maxEnvFile)
	}
	return nil
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// envFileContent is env as podman's env file: "NAME=value" lines, sorted.
func envFileContent(env map[string]string) []byte {
	var b []byte
	for _, k := range sortedKeys(env) {
		b = append(append(append(append(b, k...), '='), env[k]...), '\n')
	}
	return b
}

// Cmd returns an *exec.Cmd running podman for inv. extra become
// descriptors 3, 4, … of podman (for a --preserve-fds the caller put in
// Args); the env file, when inv has an environment, is the descriptor
// after them, named right after the subcommand. The caller must not
// replace cmd.ExtraFiles.
func (c *Client) Cmd(ctx context.Context, inv *Invocation, extra ...*os.File) (*exec.Cmd, error) {
	if len(inv.Args) == 0 {
		return nil, fmt.Errorf("podman: empty command line")
	}
	if len(inv.Env) == 0 {
		cmd := c.command(ctx, inv.Args...)
		cmd.ExtraFiles = extra
		return cmd, nil
	}
	if err := ValidateEnv(inv.Env); err != nil {
		return nil, fmt.Errorf("podman %s: %w", inv.Args[0], err)
	}
	r, err := pipedata.Reader(envFileContent(inv.Env))
	if err != nil {
		return nil, fmt.Errorf("podman %s: environment: %w", inv.Args[0], err)
	}
	fd := 3 + len(extra)
	args := make([]string, 0, len(inv.Args)+2)
	args = append(append(args, inv.Args[0], "--env-file", "/dev/fd/"+strconv.Itoa(fd)), inv.Args[1:]...)
	cmd := c.command(ctx, args...)
	// Only podman's copy stays open after the start; this process's is
	// closed by its finalizer (or by Output at once).
	cmd.ExtraFiles = append(append([]*os.File(nil), extra...), r)
	return cmd, nil
}
