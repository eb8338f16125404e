// Package refsynctest runs the ref sync's sandbox scripts on the host
// against a directory standing for the sandbox's /workspace, for tests.
package refsynctest

import (
	"context"
	"os/exec"
	"slices"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/refsync"
)

// Local is a refsync.Sandbox whose /workspace is Dir on the host.
type Local struct{ Dir string }

// Name implements refsync.Sandbox.
func (l Local) Name() string { return "test" }

// Start implements refsync.Sandbox: argv is `sh -c SCRIPT [args…]`, with
// /workspace in SCRIPT rewritten to Dir.
func (l Local) Start(ctx context.Context, argv []string) (*refsync.Proc, error) {
	argv = slices.Clone(argv)
	argv[2] = strings.ReplaceAll(argv[2], "/workspace", l.Dir)
	return refsync.StartCmd(exec.CommandContext(ctx, argv[0], argv[1:]...))
}
