// Package hostgit is the one adapter of host git: every git lazaret runs on
// the host goes through Git, with one fixed environment and the hardening
// options. The principle it serves (see internal/coordinator/gitsentry): the host never
// runs git against metadata the agent can write.
package hostgit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/execx"
)

// ErrNotInstalled is returned when no git executable is found on the host.
var ErrNotInstalled = errors.New("git is not installed on the host")

// Error is a failed host git invocation.
type Error struct{ execx.Failure }

// Error names git's subcommand: the first argument that is not an option.
func (e *Error) Error() string {
	verb := ""
	for _, a := range e.Args {
		if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
			verb = a
			break
		}
	}
	return e.Message("git", verb)
}

// hardening are the -c options every host git call carries. They override
// whatever the user's configuration says for the duration of one call:
//   - core.hooksPath=/dev/null: no hook runs. Lazaret's own git calls have
//     no reason to run hooks, and a merge of agent content must not run a
//     hook that lives in (or calls into) the agent-written tree, such as a
//     husky hook under core.hooksPath=.husky.
//   - core.fsmonitor=false: no fsmonitor command.
//   - protocol.allow=never: no transport at all (ext:: runs a command,
//     file:// reads another repository's config); lazaret never fetches,
//     objects come in through index-pack.
//   - log.showSignature=false: git log runs no gpg.program on a signature
//     the agent wrote (merge.verifySignatures, a deliberate choice of the
//     user, is left alone).
//   - core.pager=cat, color.pager=false: nothing is piped through a pager.
//   - gc.auto=0, maintenance.auto=false: no background gc forked from a
//     background ref sync.
//   - safe.directory=*: host git only ever runs in directories lazaret chose
//     (the workspace the user started it in, that repository's common dir,
//     lazaret's own clone while creating it), and their owner legitimately
//     differs when root runs lazaret as its unprivileged user (`make run`).
//     The hooks and fsmonitor that safe.directory guards against are
//     disabled above anyway.
var hardening = []string{
	"-c", "safe.directory=*",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "protocol.allow=never",
	"-c", "log.showSignature=false",
	"-c", "core.pager=cat",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
}

// passEnv are the only variables of lazaret's environment host git sees.
// Everything GIT_* is dropped (GIT_DIR, GIT_WORK_TREE, GIT_CONFIG_*,
// GIT_EXEC_PATH, GIT_SSH_COMMAND, ...): lazaret decides which repository git
// works on. HOME and XDG_CONFIG_HOME stay so the user's own global
// configuration (trusted, theirs) applies, as does the system one.
var passEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM", "NO_COLOR", "XDG_CONFIG_HOME"}

// Git runs host git with a fixed environment and the hardening options.
type Git struct {
	// Bin is the git executable; "git" from PATH when empty.
	Bin string
	Log *slog.Logger
}

func (g *Git) bin() string {
	if g.Bin != "" {
		return g.Bin
	}
	return "git"
}

func (g *Git) logger() *slog.Logger {
	if g.Log != nil {
		return g.Log
	}
	return slog.New(slog.DiscardHandler)
}

// env is the environment of every host git call.
func env() []string {
	out := make([]string, 0, len(passEnv)+6)
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return append(out,
		"GIT_TERMINAL_PROMPT=0",
		// git status must not refresh (rewrite) the user's index behind
		// their back.
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_EDITOR=true",
		// LFS smudge would fetch over the network while lazaret builds a
		// clone; the pointer files are enough for the agent to start.
		"GIT_LFS_SKIP_SMUDGE=1",
	)
}

// noDriverArgs go on every diff, log and show lazaret runs on the agent's
// commits: no diff.external and no textconv, which the agent's committed
// .gitattributes would select (a user-defined command run on its content,
// and a rendering that can hide what a merge brings in).
var noDriverArgs = []string{"--no-ext-diff", "--no-textconv"}

// command returns a hardened git command run in dir (a host directory that
// lazaret trusts: the user's workspace, the host common dir, or a clone
// lazaret is building, never the agent clone once built). Repository
// discovery stops at dir (GIT_CEILING_DIRECTORIES is its parent): a .git
// above the directory lazaret chose is never used.
func (g *Git) command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	full := make([]string, 0, len(hardening)+len(args)+1)
	full = append(full, "--no-pager")
	full = append(full, hardening...)
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, g.bin(), full...)
	cmd.Dir = dir
	cmd.Env = env()
	if filepath.IsAbs(dir) {
		cmd.Env = append(cmd.Env, "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	}
	g.logger().Debug("git", "dir", dir, "args", args)
	return cmd
}

// stream runs git in dir with its output going to stdout and stderr (which
// the caller renders as it goes).
func (g *Git) stream(ctx context.Context, dir string, stdout, stderr io.Writer, args ...string) error {
	cmd := g.command(ctx, dir, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return g.wrap(args, cmd.Run(), "")
}

// output runs git in dir with stdin (nil: none) and returns its stdout.
func (g *Git) output(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	stdout, stderr, err := execx.Output(g.command(ctx, dir, args...), stdin)
	return stdout, g.wrap(args, err, stderr)
}

// line runs git and returns its stdout without the trailing newline.
func (g *Git) line(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := g.output(ctx, dir, nil, args...)
	return strings.TrimRight(string(out), "\n"), err
}

// run runs git, discarding stdout.
func (g *Git) run(ctx context.Context, dir string, args ...string) error {
	_, err := g.output(ctx, dir, nil, args...)
	return err
}

func (g *Git) wrap(args []string, err error, stderr string) error {
	exited := func(code int) error { return &Error{execx.Failure{Args: args, ExitCode: code, Stderr: stderr}} }
	return execx.Wrap(err, exited, ErrNotInstalled, "git "+strings.Join(args, " "))
}

// ParseBatch reads n objects of type typ, each at most maxSize
// bytes, from `git cat-file --batch` output.
func ParseBatch(out []byte, n int, typ string, maxSize int) ([][]byte, error) {
	br := bufio.NewReader(bytes.NewReader(out))
	var res [][]byte
	for i := 0; i < n; i++ {
		hdr, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("cat-file --batch: %w", err)
		}
		f := strings.Fields(hdr)
		if len(f) != 3 || f[1] != typ {
			return nil, fmt.Errorf("cat-file --batch: bad header %q", hdr)
		}
		size, err := strconv.Atoi(f[2])
		if err != nil || size < 0 || size > maxSize {
			return nil, fmt.Errorf("cat-file --batch: %s of size %q", typ, f[2])
		}
		buf := make([]byte, size+1)
		if _, err := io.ReadFull(br, buf); err != nil || buf[size] != '\n' {
			return nil, fmt.Errorf("cat-file --batch: truncated %s", typ)
		}
		res = append(res, buf[:size])
	}
	return res, nil
}
