package eschost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// Executor runs an approved command on the host.
type Executor struct {
	// Env is the complete environment of the command (MinimalEnv).
	Env []string
	// Timeout kills the command's process group; DefaultTimeout when 0.
	Timeout time.Duration
	// OutputCap bounds each of stdout and stderr; DefaultOutputCap when 0.
	// Output beyond it is dropped (and the result marked truncated).
	OutputCap int64
}

// Defaults of Executor.
const (
	DefaultTimeout   = 10 * time.Minute
	DefaultOutputCap = 16 << 20
)

// MinimalEnv is the fixed environment of host commands: PATH (absolute
// entries only), HOME, LANG and TERM=dumb. Nothing comes from the request,
// so LD_PRELOAD, NODE_OPTIONS, GIT_* and friends can never be injected.
func MinimalEnv(path, home, lang string) []string {
	if lang == "" {
		lang = "C.UTF-8"
	}
	return []string{"PATH=" + escprompt.SafePath(path), "HOME=" + home, "LANG=" + lang, "TERM=dumb"}
}

// Result is the outcome of one command.
type Result struct {
	ExitCode  int
	Duration  time.Duration
	TimedOut  bool
	Truncated bool
	// Sizes and SHA-256 (hex) of the output kept (within the cap).
	StdoutBytes, StderrBytes   int64
	StdoutSHA256, StderrSHA256 string
}

// Run executes exe with argv (argv[0] included) in dir via execve, never
// through a shell: stdin /dev/null, stdout and stderr to pipes, no other
// descriptors, a new session without a controlling terminal (so no
// TIOCSTI into the user's terminal and no /dev/tty), the time limit
// enforced on the whole process group.
func (e *Executor) Run(ctx context.Context, exe string, argv []string, dir *os.File, stdout, stderr io.Writer) (Result, error) {
	timeout, limit := e.Timeout, e.OutputCap
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if limit <= 0 {
		limit = DefaultOutputCap
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Args = argv
	cmd.Env = e.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	// The directory was opened beneath the workspace root; chdir through
	// its descriptor so a symlink swapped in after the check cannot move
	// the command elsewhere. The child still has the descriptor open when
	// it changes directory (close-on-exec only closes it at execve).
	cmd.Dir = "/proc/self/fd/" + strconv.Itoa(int(dir.Fd()))
	so := &capWriter{w: stdout, left: limit, sum: sha256.New()}
	se := &capWriter{w: stderr, left: limit, sum: sha256.New()}
	cmd.Stdout, cmd.Stderr = so, se
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	// exec.Cmd passes on every descriptor not marked close-on-exec, not
	// only 0-2. The coordinator marked what it inherited at start; mark
	// again in case anything since opened one without O_CLOEXEC.
	if err := fdsafe.MarkInherited(); err != nil {
		return Result{}, fmt.Errorf("running %s: %w", exe, err)
	}
	start := time.Now()
	err := cmd.Run()
	res := Result{Duration: time.Since(start), TimedOut: ctx.Err() == context.DeadlineExceeded, Truncated: so.truncated() || se.truncated()}
	res.StdoutBytes, res.StdoutSHA256 = so.digest()
	res.StderrBytes, res.StderrSHA256 = se.digest()
	// Kill whatever the command left behind in its group.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		} else {
			res.ExitCode = ee.ExitCode()
		}
	case errors.Is(err, exec.ErrWaitDelay):
		res.ExitCode = cmd.ProcessState.ExitCode()
	default:
		return res, fmt.Errorf("running %s: %w", exe, err)
	}
	return res, nil
}

// capWriter forwards at most left bytes and silently drops the rest, so a
// chatty command cannot fill the coordinator's memory or the client.
type capWriter struct {
	mu   sync.Mutex
	w    io.Writer
	left int64
	drop bool
	sum  hash.Hash
	n    int64
}

func (c *capWriter) digest() (int64, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, hex.EncodeToString(c.sum.Sum(nil))
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if int64(len(p)) > c.left {
		p = p[:c.left]
		c.drop = true
	}
	c.left -= int64(len(p))
	c.n += int64(len(p))
	c.sum.Write(p)
	if len(p) > 0 {
		if _, err := c.w.Write(p); err != nil {
			// The client went away: keep draining so the command is not
			// blocked on a full pipe until its timeout.
			c.left, c.drop = 0, true
		}
	}
	return n, nil
}

func (c *capWriter) truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drop
}
