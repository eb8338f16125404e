package kubecli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/clicore/keeper"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/secretfetch"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// sessionRequest is one `shell` or `exec`.
type sessionRequest struct {
	profile string
	tty     bool
	command []string
	shell   bool
	start   startOptions
}

// forwarded are the signals passed on to a command without a terminal
// (with one, Ctrl-C and its kin arrive as bytes in raw mode).
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// runSession starts (or joins) the workspace's sandbox and runs the
// command in its agent container through the API server, with lazaret's
// exit codes: the command's own, 126/127 when the sandbox cannot run it,
// 125 when the exec itself failed.
func (g *globals) runSession(ctx context.Context, r sessionRequest) error {
	keeperLink := clicore.OpenKeeperLink() // first: no child may inherit the marker
	cfg, c, t, err := g.clientFor(r.profile)
	if err != nil {
		return err
	}
	// The values first: a source that fails stops everything before any
	// object is made.
	if r.start.secrets, err = secretfetch.Fetch(ctx, t.profile); err != nil {
		return err
	}
	gt, err := g.gitTarget(ctx, cfg, t)
	if err != nil {
		return err
	}
	run, err := g.start(ctx, cfg, c, t, r.start)
	if err != nil {
		return err
	}
	defer run.refresh.run(g)()
	if gt != nil {
		if err := g.seed(ctx, c, run.pod, gt); err != nil {
			return err
		}
	}
	command := r.command
	if r.shell {
		command = clicore.InteractiveShell
	}
	return g.runOnPod(ctx, podSession{cfg: cfg, c: c, t: t, pod: run.pod, command: command, tty: r.tty, gt: gt, keeperLink: keeperLink})
}

// podSession is one session's command in a running pod: a new one or,
// with resume, a kept one taken back after its lazaret-kube died
// (resume.go).
type podSession struct {
	cfg *config.Config
	c   *kube.Client
	t   *target
	pod string
	// command is the user's (the shell, for `shell`), before any wrapping.
	command    []string
	tty        bool
	gt         *gitTarget
	keeperLink *clicore.KeeperLink
	resume     *resumeHold
}

// runOnPod runs s and returns lazaret's exit code for it. A kept session
// is recorded while it runs, so that a new lazaret-kube can take it back
// if this one dies.
func (g *globals) runOnPod(ctx context.Context, s podSession) error {
	in, out, _ := g.io.Files()
	c := s.c
	pidFile := "/tmp/.lazaret-kube-" + randomID() + ".pid"
	// Not ctx: SIGINT is the command's, not lazaret's.
	ectx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var resumed *resumeRecord
	if s.resume != nil {
		resumed = s.resume.rec
	}
	sio := g.startSessionIO(ctx, s.cfg, c, s.t, s.pod, s.command, s.tty, cancel, resumed)
	defer sio.close()
	kept := s.keeperLink != nil && s.tty
	hold := s.resume
	if kept && hold == nil {
		hold = g.recordKept(s, sio)
	}
	// A new session's record goes with any early error (its command never
	// started); a resumed one's stays for another try.
	final := s.resume == nil
	defer func() { hold.release(final) }()
	command := sessionCommand(sio.esc, s.command, pidFile, s.tty)
	if s.keeperLink != nil {
		s.keeperLink.Started(sio.sessionID(), sio.keptState)
	}
	tm, err := openTerminal(in, out, s.tty)
	if err != nil {
		return err
	}
	defer tm.close()
	// SIGTERM (a shutdown, a kill) leaves a kept session running in its
	// pod, to be taken back; SIGHUP (its terminal gone) ends it.
	var leave func()
	left := make(chan struct{})
	if kept {
		var once sync.Once
		leave = func() { once.Do(func() { close(left) }) }
	}
	stop := g.forwardSignals(c, s.pod, pidFile, s.tty, cancel, leave)
	defer stop()
	var code int
	if kept {
		// Kept: the command lives under the pod's terminal keeper and
		// outlives this machine's link to it (podterm.go).
		code, err = g.runPodTerm(c, podTermRequest{pod: s.pod, id: sio.sessionID(), command: command, resume: s.resume != nil,
			in: sio.stdin, out: sio.stdout, sizes: tm.Sizes(), hangup: ectx.Done(), leave: left, linkState: sio.hub.linkState})
		// Hung up without its end seen, or left, the command may run
		// on: the record stays.
		final = !errors.Is(err, context.Canceled) && !errors.Is(err, errLeft)
		if errors.Is(err, errLeft) {
			sio.leave()
			tm.close()
			i := keeper.Info{Session: sio.sessionID(), Profile: s.t.profile.Name}
			return clicore.WithHint(fmt.Errorf("lazaret-kube was told to end (SIGTERM); session %s goes on in pod %s", i.ShortID(), visible.Line(s.pod)),
				exitcode.Failure, clicore.AttachLine(invocation, i)+" takes it back")
		}
	} else {
		code, err = c.ExecIn(ectx, kube.ExecRequest{
			Pod: s.pod, Container: kubespec.ContainerName, Command: command,
			Stdin: sio.stdin, Stdout: sio.stdout, Stderr: g.io.ErrOut, TTY: s.tty, Sizes: tm.Sizes(),
		})
	}
	sio.close() // the prompt, if one is up, before the terminal's modes
	tm.close()
	g.syncAfter(c, s.pod, s.gt)
	var se *kube.StartError
	switch {
	case ectx.Err() != nil:
		return context.Canceled // SIGTERM or SIGHUP ended it
	case errors.As(err, &se):
		return err
	case err != nil:
		return execFailed{fmt.Errorf("exec in pod %s: %w", s.pod, err)}
	case code != 0:
		return clicore.ExitError{Code: code}
	}
	return nil
}

// execFailed is the exec through the API server failing (exit 125, like
// a failed podman exec locally).
type execFailed struct{ err error }

func (e execFailed) Error() string { return e.err.Error() }
func (e execFailed) Unwrap() error { return e.err }

// forwardSignals passes signals lazaret receives on to the command (plain
// mode) with a second exec that kills the pid it recorded. With a
// terminal the keys travel as bytes; SIGTERM and SIGHUP (the terminal
// went away) end the session by closing its stream (cancel), except that
// SIGTERM calls leave when it is set (a kept session). The returned
// function stops it.
func (g *globals) forwardSignals(c *kube.Client, pod, pidFile string, tty bool, cancel, leave func()) func() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				switch {
				case !tty:
					go g.signalInPod(c, pod, pidFile, s)
				case s == syscall.SIGTERM && leave != nil:
					leave()
				case s == syscall.SIGTERM || s == syscall.SIGHUP:
					cancel()
				}
			}
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}

func (g *globals) signalInPod(c *kube.Client, pod, pidFile string, sig os.Signal) {
	ss, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	name := strings.TrimPrefix(unix.SignalName(ss), "SIG")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.ExecIn(ctx, kube.ExecRequest{Pod: pod, Container: kubespec.ContainerName,
		Command: []string{"/bin/sh", "-c", `kill -s "$1" "$(cat "$0")"`, pidFile, name}})
	if err != nil {
		g.log.Debug("signal in pod", "signal", name, "err", err)
	}
}
