package notify

import (
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/capped"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// CommandTimeout is how long the notify command may run before it (its
// process group) is killed.
const CommandTimeout = 10 * time.Second

// maxCommandOutput bounds what of its output reaches the coordinator log.
const maxCommandOutput = 4 << 10

// command runs [notify] command once per notice: no shell, the notice as
// JSON on stdin, its output (bounded, escaped) to the log, descriptors
// 0-2 only, in a process group of its own so the kill reaches its
// children.
type command struct {
	argv    []string
	timeout time.Duration
	log     *slog.Logger
}

func (c *command) name() string { return "command" }

func (c *command) run(ctx context.Context, q <-chan Notice) {
	for n := range q {
		if ctx.Err() != nil {
			return
		}
		c.runOne(ctx, n)
	}
}

func (c *command) runOne(ctx context.Context, n Notice) {
	body, err := json.Marshal(n)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Stdin = strings.NewReader(string(body) + "\n")
	out := &capped.Buffer{Max: maxCommandOutput}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild holding the pipes open does not hold this goroutine.
	cmd.WaitDelay = time.Second
	if err := fdsafe.MarkInherited(); err != nil {
		c.log.Warn("notify: command not run", "err", err)
		return
	}
	err = cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		c.log.Warn("notify: command killed after its time", "command", visible.Line(c.argv[0]), "timeout", c.timeout)
	} else if err != nil {
		c.log.Warn("notify: command failed", "command", visible.Line(c.argv[0]), "err", err)
	}
	if out.Len() > 0 {
		c.log.Info("notify: command output", "command", visible.Line(c.argv[0]), "output", visible.Line(out.String()), "truncated", out.Truncated())
	}
}
