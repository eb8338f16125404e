// Package connect is how the CLI reaches a domain's Session Coordinator:
// under the hold-to-bind lock (internal/engine/domainlock) that makes exactly one
// coordinator per Domain Anchor, connecting to it or spawning it detached
// (Connect), and dialing a running one (Dial).
package connect

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/lazaret-dev/lazaret/internal/wire/coordargs"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/domainlock"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/starterr"
)

// SocketWait is how long a leader waits for a coordinator it spawned to
// accept on its control socket.
const SocketWait = 10 * time.Second

// maxLogSize is the size above which the coordinator log is truncated when
// a new coordinator starts.
const maxLogSize = 4 << 20

// Spawn describes how to start a coordinator process.
type Spawn struct {
	// Exe is the lazaret executable; os.Executable() when empty.
	Exe string
	// Args are the arguments after Exe (the hidden __coordinator command
	// with its flags). Connect appends RecoverFlag when it removed a stale
	// socket.
	Args []string
	// Env is added to the coordinator's environment (NAME=value): the
	// secrets' source variables, which the CLI removed from its own so
	// that no podman it runs inherits them. The rest of the CLI's
	// environment is the coordinator's too: XDG_RUNTIME_DIR and
	// DBUS_SESSION_BUS_ADDRESS find the session bus of [notify] desktop.
	Env []string
}

// RecoverFlag tells a new coordinator that its predecessor died without
// cleaning up, so it removes the domain's labelled leftovers first.
const RecoverFlag = coordargs.RecoverFlag

// Connect attaches client to the coordinator of anchor, starting one if
// none runs (hold-to-bind, DESIGN §9):
//   - leader (non-blocking flock succeeded): connect if the control socket
//     answers; otherwise remove a stale socket, spawn the coordinator and
//     keep the lock until its socket has accepted the hello;
//   - follower (lock busy): wait for the lock, release it at once, connect.
//
// hello is sent on the connection; with hello.Session set the connection
// counts as a reference until it closes.
func Connect(ctx context.Context, a *domain.Anchor, client *ctl.Client, hello ctl.Hello, spawn Spawn, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if attempt > 0 {
			// The coordinator we found was shutting down, or a leader
			// failed: give it a moment and try again.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(min(attempt, 10)) * 50 * time.Millisecond):
			}
		}
		lock, err := domainlock.Open(a.LockFile())
		if err != nil {
			return err
		}
		err = connectOnce(ctx, a, client, hello, spawn, lock, log)
		lock.Close()
		if err == nil {
			return nil
		}
		if !retryable(err) || attempt >= 100 {
			return err
		}
		log.Debug("coordinator not ready, retrying", "err", err)
	}
}

// errRetry marks a failure after which the whole protocol starts again.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

func retryable(err error) bool {
	var r errRetry
	return errors.As(err, &r)
}

func connectOnce(ctx context.Context, a *domain.Anchor, client *ctl.Client, hello ctl.Hello, spawn Spawn, lock *domainlock.Lock, log *slog.Logger) error {
	leader, err := lock.TryLock()
	if err != nil {
		return fmt.Errorf("lock %s: %w", a.LockFile(), err)
	}
	if !leader {
		if err := lock.Lock(ctx); err != nil {
			return err
		}
		_ = lock.Unlock()
		err := client.Connect(ctx, a.ControlSocket(), hello)
		if err == nil {
			return nil
		}
		if notAnswering(err) || errors.Is(err, ctl.ErrShuttingDown) {
			return errRetry{err}
		}
		return starterr.FromWire(err)
	}
	defer lock.Unlock()
	err = client.Connect(ctx, a.ControlSocket(), hello)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ctl.ErrShuttingDown):
		return errRetry{err}
	case !notAnswering(err):
		return starterr.FromWire(err)
	}
	recoverFlag := false
	if _, serr := os.Lstat(a.ControlSocket()); serr == nil {
		// A socket nobody answers on: its coordinator was killed.
		log.Debug("removing stale control socket", "path", a.ControlSocket())
		if err := os.Remove(a.ControlSocket()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing stale control socket: %w", err)
		}
		recoverFlag = true
	}
	exited, err := startCoordinator(a, spawn, recoverFlag)
	if err != nil {
		return err
	}
	deadline := time.NewTimer(SocketWait)
	defer deadline.Stop()
	for {
		err := client.Connect(ctx, a.ControlSocket(), hello)
		if err == nil {
			return nil
		}
		if !notAnswering(err) {
			return starterr.FromWire(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("session coordinator did not open %s within %v (log: %s)", a.ControlSocket(), SocketWait, a.CoordinatorLog())
		case werr := <-exited:
			return fmt.Errorf("session coordinator exited (%v): %s", werr, lastLogLine(a.CoordinatorLog()))
		case <-time.After(15 * time.Millisecond):
		}
	}
}

// notAnswering reports whether err means no coordinator listens on the
// socket (absent, refused, or closed before answering).
func notAnswering(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ENOENT) || errors.Is(err, ctl.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET)
}

// startCoordinator spawns the coordinator detached: a new session (no
// controlling terminal, so the user's Ctrl-C and hang-ups never reach it),
// stdin /dev/null, stdout and stderr appended to the domain's log, no other
// descriptors. exec.Cmd passes on every descriptor that is not
// close-on-exec, ExtraFiles or not: what the CLI inherited from a terminal
// or IDE was marked at start (cmd/lazaret), and is marked again here. The
// returned channel yields its exit if it ends.
func startCoordinator(a *domain.Anchor, spawn Spawn, recoverFlag bool) (<-chan error, error) {
	if err := domain.EnsurePrivateDir(a.Root()); err != nil {
		return nil, fmt.Errorf("domain root: %w", err)
	}
	exe := spawn.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding lazaret's executable: %w", err)
		}
	}
	logf, err := openLog(a.CoordinatorLog())
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := append([]string(nil), spawn.Args...)
	if recoverFlag {
		args = append(args, RecoverFlag)
	}
	cmd := exec.Command(exe, args...)
	if len(spawn.Env) > 0 {
		cmd.Env = append(os.Environ(), spawn.Env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := fdsafe.MarkInherited(); err != nil {
		return nil, fmt.Errorf("starting the session coordinator: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the session coordinator: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}

func openLog(path string) (*os.File, error) {
	flags := os.O_WRONLY | os.O_APPEND | os.O_CREATE | syscall.O_NOFOLLOW
	if fi, err := os.Lstat(path); err == nil && fi.Size() > maxLogSize {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("coordinator log: %w", err)
	}
	return f, nil
}

// lastLogLine returns the last non-empty line of the coordinator log, which
// a coordinator that fails before its socket opens writes as its error.
func lastLogLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "see " + path
	}
	// The CLI's error line ("lazaret: …") is the most useful; any last
	// line will do otherwise.
	var last, errLine string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
			if strings.HasPrefix(l, "lazaret: ") {
				errLine = strings.TrimPrefix(l, "lazaret: ")
			}
		}
	}
	if errLine != "" {
		last = errLine
	}
	if last == "" {
		return "see " + path
	}
	return last + " (log: " + path + ")"
}

// ErrNotRunning means no coordinator answers on a domain's control socket.
var ErrNotRunning = errors.New("no sandbox is running")

// Dial connects to a running coordinator without attaching a session and
// without starting one; ErrNotRunning when none answers at socket.
func Dial(ctx context.Context, socket string, log *slog.Logger) (*ctl.Client, error) {
	c := ctl.NewClient(log)
	if err := c.Connect(ctx, socket, ctl.Hello{}); err != nil {
		if notAnswering(err) {
			return nil, fmt.Errorf("%w (%s)", ErrNotRunning, socket)
		}
		return nil, starterr.FromWire(err)
	}
	return c, nil
}
