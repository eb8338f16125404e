package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/cli/attach"
	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/cli/sessionlink"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/hostres"
	"github.com/lazaret-dev/lazaret/internal/engine/secretfetch"
	"github.com/lazaret-dev/lazaret/internal/execargs"
	"github.com/lazaret-dev/lazaret/internal/wire/coordargs"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// connectTimeout bounds starting (or reaching) the sandbox, including a
// cold container start on a loaded machine.
const connectTimeout = 3 * time.Minute

// containerGoneWait is how long a session whose command was killed waits
// for the coordinator to report that the whole container ended (its
// watch looks every second).
const containerGoneWait = 3 * time.Second

type execOptions struct {
	tty     bool
	detach  bool
	choices startChoices
}

func newExecCmd(g *globalOptions) *cobra.Command {
	o := &execOptions{}
	cmd := &cobra.Command{
		Short: "Run a command in the sandbox of this directory",
		Long: `Run a command in the sandbox of PROFILE (default "default") for the current
directory, starting the sandbox if needed. Standard input, output and error
are passed through and lazaret exits with the command's exit code.

With one word before "--" (or before the command, when it is a profile
name) that word is the profile. -t may come before PROFILE or right after
it: "lazaret exec -t dev -- vim", "lazaret exec dev -t -- vim".`,
		RunE: func(cmd *cobra.Command, args []string) error {
			profile, command, err := splitProfile(g, cmd, args)
			if err != nil {
				return err
			}
			if o.detach && !o.tty {
				return usageError{errors.New("exec --detach: needs -t (a detached command runs on a terminal the session keeper holds)")}
			}
			if o.detach && !kept() {
				return keptSession(cmd.Context(), g, sessionRequest{profile: profile, tty: true, command: command, choices: o.choices}, true)
			}
			return runSession(cmd.Context(), g, sessionRequest{profile: profile, tty: o.tty, command: command, choices: o.choices})
		},
	}
	clicore.Verb("exec", cmd)
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().BoolVarP(&o.tty, "tty", "t", false, "run the command under a terminal (for interactive programs)")
	cmd.Flags().BoolVar(&o.detach, "detach", false, "with -t: start the command detached and print its session id (`lazaret attach` takes it)")
	o.choices.addFlags(cmd.Flags())
	return cmd
}

// splitProfile separates the optional PROFILE from the command
// (execargs.Split); a first word is a profile only if it names a
// configured one.
func splitProfile(g *globalOptions, cmd *cobra.Command, args []string) (string, []string, error) {
	profile, command, err := execargs.Split(cmd, args, execargs.KnownProfile(g.loadConfig))
	if err != nil {
		return "", nil, usageError{err}
	}
	return profile, command, nil
}

// sessionRequest is one `shell` or `exec`.
type sessionRequest struct {
	profile string
	tty     bool
	command []string
	shell   bool
	choices startChoices
}

// runSession attaches a Client Session to the sandbox (starting it if
// needed) and runs the command with podman exec in this process, so the
// command's streams never pass through the coordinator.
func runSession(ctx context.Context, g *globalOptions, r sessionRequest) error {
	keeperLink := openKeeperLink() // first: no child may inherit the marker
	r.choices.consentedFor = takeDirectConsent(keeperLink != nil)
	s, err := prepareSession(ctx, g, r)
	if err != nil {
		return err
	}
	defer s.closeLink()
	cctx, cancel, err := s.connect(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	defer s.client.Close()
	if keeperLink != nil {
		keeperLink.started(s)
	}
	spec, o, err := s.execSpec(cctx)
	if s.delegation != nil {
		defer s.delegation.Close()
	}
	if err != nil {
		return err
	}
	code, err := s.attach(spec, o)
	if err != nil {
		return err
	}
	if s.hungUp {
		// Nobody is at the terminal to wait for the ref sync or read
		// about it: the session ends now (its connection closes, so the
		// coordinator's count drops; a teardown makes the last sync).
		return exitError{code}
	}
	if err := s.waitEnd(code); err != nil {
		return err
	}
	syncAfterCommand(s.client, s.stderr, g)
	return commandExit(code, s.p.Name)
}

// linkCloseWait bounds closing the link after a hang-up: a prompt's
// program has no terminal left to restore.
const linkCloseWait = 2 * time.Second

// closeLink withdraws the session's prompts and waits until the terminal
// is restored (sessionlink.Link.Close); after a hang-up, not for long.
func (s *session) closeLink() {
	if !s.hungUp {
		s.link.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		s.link.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(linkCloseWait):
		s.g.log.Debug("the prompt did not end after the hang-up")
	}
}

// session is one `shell` or `exec` on its way: what each step of
// runSession hands the next.
type session struct {
	g      *globalOptions
	r      sessionRequest
	cfg    *config.Config
	p      *config.Profile
	a      *domain.Anchor
	stdin  *os.File
	stdout *os.File
	stderr *os.File
	gate   *attach.Gate
	link   *sessionlink.Link
	client *ctl.Client
	// secretEnv: the secrets' source variables, taken out of this
	// process's environment; only the coordinator it spawns gets them.
	secretEnv []string
	// delegation is the session holder's descriptor 3 for this exec.
	delegation *os.File

	stop     chan struct{}
	stopOnce sync.Once
	reason   string
	// hungUp: the user's terminal went away and attach ended the
	// session (attach.ErrHungUp).
	hungUp bool
}

// end records why the sandbox went away under the command.
func (s *session) end(why string) {
	s.stopOnce.Do(func() { s.reason = why; close(s.stop) })
}

// prepareSession checks the configuration and the workspace and opens the
// session's link: the Session Anchor (its id is LAZARET_SESSION_ID) and
// its escalation prompts, shown on the terminal only when the command runs
// under a PTY (attach's gate hands the terminal over).
func prepareSession(ctx context.Context, g *globalOptions, r sessionRequest) (*session, error) {
	if err := g.refuseRoot(); err != nil {
		return nil, err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	p, a, err := g.resolveDomain(cfg, r.profile, "")
	if err != nil {
		return nil, err
	}
	if err := p.CheckEnv(); err != nil {
		return nil, err
	}
	// A limit this host cannot hold stops the start here, named, before
	// anything is created (the coordinator decides again from the same
	// profile when it makes the container).
	if host, err := hostres.Probe(); err == nil {
		if _, err := hostres.Decide(p.Name, p.Resources, host); err != nil {
			return nil, err
		}
	}
	if err := g.checkStartChoices(ctx, p, a, r.choices); err != nil {
		return nil, err
	}
	// Only a coordinator this CLI spawns gets the secrets' source
	// variables; no podman this CLI runs inherits them.
	secretEnv := secretfetch.TakeSources(p)
	if err := g.gitPreflight(ctx, p, a); err != nil {
		return nil, err
	}
	s := &session{g: g, r: r, cfg: cfg, p: p, a: a, secretEnv: secretEnv, gate: attach.NewGate(), stop: make(chan struct{})}
	s.stdin, s.stdout, s.stderr = g.files()
	var promptTTY *os.File
	if r.tty && isTerminal(s.stdin) {
		promptTTY = s.stdin
	}
	noticeGate := s.gate // network denial notices go between output lines
	if !r.tty {
		noticeGate = nil
	}
	// Q at a prompt stops the sandbox through the client (sessionlink).
	s.link, err = sessionlink.New(sessionlink.Options{TTY: promptTTY, Pause: s.gate.Pause, Resume: s.gate.Resume,
		Discard: s.gate.Discard, Notice: func(line string) { noticeGate.Notice(s.stderr, line) }})
	if err != nil {
		return nil, err
	}
	// A prompt on a terminal that hung up is denied ("terminal closed").
	s.gate.OnHangUp(s.link.Hangup)
	return s, nil
}

// connect attaches the session to the domain's coordinator, starting it
// (and getting its image) when needed, and registers the session's link.
// The returned context bounds the calls that follow.
func (s *session) connect(ctx context.Context) (context.Context, context.CancelFunc, error) {
	shown := s.r.command
	if s.r.shell {
		shown = []string{"shell"}
	}
	hello := ctl.Hello{Session: &ctl.SessionInfo{ID: s.link.SessionID(), PID: os.Getpid(), Profile: s.p.Name, TTY: s.r.tty, Command: shown}}
	s.client = ctl.NewClient(s.g.log)
	s.link.Install(s.client)
	s.client.Handle(ctl.TypeShutdown, func(_ context.Context, req *ctl.Request) (any, error) {
		var sd ctl.Shutdown
		_ = req.Decode(&sd)
		s.end(sd.Reason)
		return nil, nil
	})
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	cancelLast := func() { cancel() }
	args, err := s.g.coordinatorArgs(s.cfg, s.a, s.r.choices.withChanges)
	if err != nil {
		return cctx, cancelLast, err
	}
	announce := s.g.startAnnouncer(ctx, s.p, s.a)
	carried := s.g.carryAnnouncer(s.p, s.a, s.r.choices.withChanges)
	d := s.g.domainClient(s.a)
	if err := s.g.startWithImage(ctx, s.p, func() error {
		// A fresh timeout for each attempt: a pull may come between.
		cancel()
		cctx, cancel = context.WithTimeout(ctx, connectTimeout)
		return d.connect(cctx, s.client, hello, connect.Spawn{Args: args, Env: s.secretEnv})
	}); err != nil {
		return cctx, cancelLast, sessionError(err, s.p.Name)
	}
	announce()
	carried()
	go func() {
		<-s.client.Done()
		s.end("the session coordinator exited unexpectedly")
	}()
	if err := s.link.Register(cctx, s.client); err != nil && !errors.Is(err, sessionlink.ErrDisabled) {
		s.client.Close()
		return cctx, cancelLast, err
	}
	return cctx, cancelLast, nil
}

// execSpec asks the coordinator how to run the command and builds its
// exec (run by attach with runsc exec or podman exec): without a terminal
// the command first records its pid (for signals, see signalInSandbox),
// and the session holder goes first.
func (s *session) execSpec(ctx context.Context) (ctl.ExecSpec, podman.ExecOptions, error) {
	spec, err := s.client.ExecSpec(ctx, ctl.ExecSpecRequest{SessionID: s.link.SessionID(), TTY: s.r.tty})
	if err != nil {
		return spec, podman.ExecOptions{}, fmt.Errorf("asking the coordinator how to run the command: %w", err)
	}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	delegation, err := s.link.ExecDelegation(spec.Env)
	if err != nil {
		return spec, podman.ExecOptions{}, err
	}
	s.delegation = delegation // the holder's descriptor 3, nil without one
	command := s.r.command
	if s.r.shell {
		command = clicore.InteractiveShell
	}
	var pidFile string
	if !s.r.tty {
		// Without a terminal, signals have to be delivered inside the
		// sandbox (podman exec does not proxy them): the command records
		// its pid, then becomes the command (same pid, argv and stdio).
		pidFile = s.pidFile()
		if !s.link.Holds() {
			command = append([]string{"/bin/sh", "-c", `echo $$ > "$0" 2>/dev/null; exec "$@"`, pidFile}, command...)
		}
	} else if s.link.Holds() {
		// With one, the holder's record is where a hang-up of the
		// user's terminal is delivered (attach.Options.Hangup).
		pidFile = s.pidFile()
	}
	// The session holder goes first: it keeps the delegated key from
	// every other session's processes, runs the command as its child and
	// records its pid.
	command = s.link.Command(command, pidFile)
	o := podman.ExecOptions{
		Container: spec.Container, Interactive: true, TTY: s.r.tty,
		Env: spec.Env, Workdir: spec.Workdir, User: spec.User, Command: command,
		PreserveFDs: len(s.extraFiles()),
		// The holder isolates the session (escprompt.IsolateFlag) and
		// needs two capabilities for it, which it drops before the
		// command; runsc exec gets them as escprompt.IsolationCaps.
		Privileged: s.link.Holds(),
	}
	// Checked here for either path (runsc exec takes any value, podman's
	// env file does not): the same environment fails the same way.
	_, err = podman.ExecArgs(o)
	return spec, o, err
}

// extraFiles are the descriptors the exec passes on from 3: the holder's
// delegation socket, when there is one.
func (s *session) extraFiles() []*os.File {
	if s.delegation == nil {
		return nil
	}
	return []*os.File{s.delegation}
}

// pidFile is where a command without a terminal records its pid: for a
// session under the isolating holder, a directory no session can see.
func (s *session) pidFile() string {
	if s.link.Holds() {
		return escprompt.SandboxPidDir + "/" + s.pidName()
	}
	return "/tmp/.lazaret-" + s.link.SessionID() + ".pid"
}

// pidName is pidFile's name in escprompt.SandboxPidDir.
func (s *session) pidName() string { return s.link.SessionID() + ".pid" }

// attach runs the command, with runsc exec directly when it can
// (directExec) and podman exec otherwise, with the terminal or the
// streams attached, and returns its exit code.
func (s *session) attach(spec ctl.ExecSpec, o podman.ExecOptions) (int, error) {
	pm := s.g.podmanClient()
	opts := attach.Options{TTY: s.r.tty, Stdin: s.stdin, Stdout: s.stdout, Stderr: s.stderr, Stop: s.stop, Gate: s.gate}
	if !s.r.tty {
		opts.Signal = func(sig os.Signal) { signalInSandbox(pm, spec, s.signalCommand, sig, s.g) }
	} else if s.link.Holds() {
		// A hang-up goes to the session's controlling process in the
		// sandbox (the holder's namespace init, which passes it to the
		// shell), as the kernel's does; its SIGKILL takes the session's
		// whole PID namespace with it.
		opts.Hangup = func(sig syscall.Signal) { signalInSandbox(pm, spec, s.signalCommand, sig, s.g) }
	}
	if d := s.directExec(spec, o); d != nil {
		opts.Wiring = d
		code, err := attach.Run(d.Cmd, opts)
		s.link.WaitAbort()
		if errors.Is(err, attach.ErrHungUp) {
			s.hungUp = true
			return code, nil
		}
		if err != nil {
			return 0, fmt.Errorf("runsc exec: %w", err)
		}
		code, msg := d.Result(code)
		if msg != "" {
			fmt.Fprintf(s.stderr, "lazaret: runsc exec: %s\n", msg)
		}
		return code, nil
	}
	argv, err := podman.ExecArgs(o)
	if err != nil {
		return 0, err
	}
	// Not tied to ctx: SIGINT is for the command (forwarded by attach),
	// not for lazaret.
	pc, err := pm.Cmd(context.Background(), argv, s.extraFiles()...)
	if err != nil {
		return 0, err
	}
	code, err := attach.Run(pc, opts)
	s.link.WaitAbort() // a Q at a prompt: the stop is recorded before this session detaches
	if errors.Is(err, attach.ErrHungUp) {
		s.hungUp = true
		return code, nil
	}
	if err != nil {
		return 0, fmt.Errorf("podman exec: %w", err)
	}
	return code, nil
}

// waitEnd tells the command's own exit from the sandbox going away under
// it (lazaret stop, the container or the coordinator died). A command
// killed, or a podman failure, may be the container itself ending: its
// coordinator notices within about a second and says so.
func (s *session) waitEnd(code int) error {
	var grace <-chan time.Time // nil: do not wait
	if code == 128+int(syscall.SIGKILL) || code == podman.ExitPodmanError {
		grace = time.After(containerGoneWait)
	}
	select {
	case <-s.stop:
		return fmt.Errorf("session ended: %s", s.reason)
	default:
	}
	if grace == nil {
		return nil
	}
	select {
	case <-s.stop:
		return fmt.Errorf("session ended: %s", s.reason)
	case <-grace:
		return nil
	}
}

// commandExit is lazaret's exit for the command's exit code.
func commandExit(code int, profile string) error {
	switch code {
	case 0:
		return nil
	case podman.ExitPodmanError:
		return withHint(errors.New("the exec in the sandbox failed (exit 125; the message is above)"), exitFailure,
			"if the sandbox's container is gone or broken, "+verbLine("stop", profile)+" and run the command again")
	}
	return exitError{code}
}

// gitSyncWait bounds the wait for the ref sync after a command.
const gitSyncWait = 10 * time.Second

// syncAfterCommand asks the coordinator for one ref sync of the agent
// clone and waits for it, so that the command's last commit is on the host
// when lazaret exec returns (the watcher would bring it a moment later,
// racing a `git log` typed right after). Bounded; a one-line warning when
// it did not finish. A coordinator without the request type (older
// version) is not waited for.
func syncAfterCommand(client *ctl.Client, stderr io.Writer, g *globalOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), gitSyncWait)
	defer cancel()
	err := client.GitSync(ctx)
	switch {
	case err == nil:
	case errors.Is(err, ctl.ErrUnknownType), errors.Is(err, ctl.ErrClosed):
		// An older coordinator, or one that went away (its teardown made
		// the last sync).
		g.log.Debug("no git sync after the command", "err", err)
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(stderr, "lazaret: the agent's last commits are not on the host yet (ref sync still running after %s); they follow shortly\n", gitSyncWait)
	default:
		fmt.Fprintf(stderr, "lazaret: syncing the agent's commits to the host: %v\n", err)
	}
}

// signalCommand is the command that sends sig to the session's command
// from a second exec in the sandbox: the isolating holder's pid, through
// the read-only front end; without a holder, the pid the command recorded.
func (s *session) signalCommand(sig syscall.Signal) []string {
	if s.link.Holds() {
		return escprompt.SignalCommand(s.pidName(), int(sig))
	}
	name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
	return []string{"/bin/sh", "-c", `kill -s "$1" "$(cat "$0")"`, s.pidFile(), name}
}

// signalInSandbox sends sig to the session's command with the command
// that command returns, from a second podman exec in the same sandbox.
func signalInSandbox(pm *podman.Client, spec ctl.ExecSpec, command func(syscall.Signal) []string, sig os.Signal, g *globalOptions) {
	ss, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	name := unix.SignalName(ss)
	argv, err := podman.ExecArgs(podman.ExecOptions{
		Container: spec.Container, User: spec.User, Command: command(ss),
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pm.OutputInvocation(ctx, argv); err != nil {
		g.log.Debug("signal in sandbox", "signal", name, "err", err)
	}
}

// sessionError adds the fix to errors of reaching or starting the sandbox.
func sessionError(err error, profile string) error {
	var am *ctl.APIMismatchError
	if errors.As(err, &am) {
		return withHint(err, exitSetup, "a coordinator of another lazaret version runs this sandbox: stop it with "+verbLine("stop", profile)+" and retry")
	}
	return err
}

// files returns the process's standard streams as files (attach hands them
// to podman directly); streams replaced for tests fall back to the real
// ones.
func (g *globalOptions) files() (in, out, errOut *os.File) {
	in, out, errOut = os.Stdin, os.Stdout, os.Stderr
	if f, ok := g.io.In.(*os.File); ok {
		in = f
	}
	if f, ok := g.io.Out.(*os.File); ok {
		out = f
	}
	if f, ok := g.io.ErrOut.(*os.File); ok {
		errOut = f
	}
	return in, out, errOut
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return f != nil && term.IsTerminal(int(f.Fd())) }

// coordinatorArgs are the arguments of the coordinator process
// (coordargs) of domain d, carrying the global flags that matter.
func (g *globalOptions) coordinatorArgs(cfg *config.Config, d *domain.Anchor, withChanges bool) ([]string, error) {
	a := coordargs.Args{Verbose: g.verbose, AllowRoot: g.allowRoot, Profile: d.Profile, Workspace: d.Workspace, Attempt: d.Attempt, WithChanges: withChanges}
	if cfg.File != "" {
		abs, err := filepath.Abs(cfg.File)
		if err != nil {
			return nil, err
		}
		a.Config = abs
	}
	return a.Argv(), nil
}
