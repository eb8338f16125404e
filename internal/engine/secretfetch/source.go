package secretfetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/capped"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// Value reads s's value from its source: the host variable, the file (one
// trailing line break dropped) or the command's stdout (the same). The
// value is checked: not empty, no line break or NUL inside. Errors name the
// file, line and key of s.
func Value(ctx context.Context, s *config.Secret) (string, error) {
	var raw []byte
	switch {
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok {
			return "", s.Locate(fmt.Errorf("host variable %s is not set", s.Env))
		}
		raw = []byte(v)
	case s.File != "":
		b, err := readFile(s.File)
		if err != nil {
			return "", s.Locate(err)
		}
		raw = b
	default:
		b, err := run(ctx, s.Command)
		if err != nil {
			return "", s.Locate(err)
		}
		raw = b
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	if v == "" || strings.ContainsAny(v, "\r\n\x00") {
		return "", s.Locate(errors.New("the source gave an empty value, or one with a line break or NUL inside"))
	}
	return v, nil
}

// readFile reads the secret file, checking on the opened file (not only
// on its name, which may change meanwhile) config's rule for it.
func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read %s: %w", strconv.Quote(name), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := config.CheckSecretFile(name, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, config.MaxSecretSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > config.MaxSecretSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", strconv.Quote(name), config.MaxSecretSize)
	}
	return b, nil
}

// commandTimeout bounds a secret command.
const commandTimeout = time.Minute

// run runs the command (never a shell) and returns its stdout; its stderr
// (the last line, which names the failure) goes into the error.
func run(ctx context.Context, argv []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	stdout, stderr := &capped.Buffer{Max: config.MaxSecretSize + 1}, &capped.Buffer{Max: config.MaxSecretSize + 1}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	name := strconv.Quote(argv[0])
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg != "" {
			return nil, fmt.Errorf("command %s: %w: %s", name, err, visible.Line(msg))
		}
		return nil, fmt.Errorf("command %s: %w", name, err)
	}
	if len(stdout.Bytes()) > config.MaxSecretSize {
		return nil, fmt.Errorf("command %s: output larger than %d bytes", name, config.MaxSecretSize)
	}
	return stdout.Bytes(), nil
}

// TakeSources removes the host variables p's secrets are read from from
// this process's environment, so that no child (podman) inherits a value,
// and returns them as NAME=value for the one child that needs them (the
// coordinator the CLI spawns).
func TakeSources(p *config.Profile) []string {
	var out []string
	for _, ps := range p.Secrets {
		if n := ps.Secret.Env; n != "" {
			if v, ok := os.LookupEnv(n); ok {
				out = append(out, n+"="+v)
				os.Unsetenv(n)
			}
		}
	}
	return out
}
