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

	"github.com/lazaret-dev/lazaret/internal/attach"
	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/coord"
	"github.com/lazaret-dev/lazaret/internal/ctl"
	"github.com/lazaret-dev/lazaret/internal/escalation/sessionlink"
	"github.com/lazaret-dev/lazaret/internal/podman"
)

// connectTimeout bounds starting (or reaching) the sandbox, including a
// cold container start on a loaded machine.
const connectTimeout = 3 * time.Minute

// containerGoneWait is how long a session whose command was killed waits
// for the coordinator to report that the whole container ended (its
// watch looks every second).
const containerGoneWait = 3 * time.Second

type execOptions struct {
	tty bool
}

func newExecCmd(g *globalOptions) *cobra.Command {
	o := &execOptions{}
	cmd := &cobra.Command{
		Use:   "exec [PROFILE] [--] COMMAND [ARG...]",
		Short: "Run a command in the sandbox of this directory",
		Long: `Run a command in the sandbox of PROFILE (default "default") for the current
directory, starting the sandbox if needed. Standard input, output and error
are passed through and lazaret exits with the command's exit code.

With one word before "--" (or before the command, when it is a profile
name) that word is the profile. -t may come before PROFILE or right after
it: "lazaret exec -t dev -- vim", "lazaret exec dev -t -- vim".`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			profile, command, err := splitProfile(g, cmd, args)
			if err != nil {
				return err
			}
			return runSession(cmd.Context(), g, sessionRequest{profile: profile, tty: o.tty, command: command})
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().BoolVarP(&o.tty, "tty", "t", false, "run the command under a terminal (for interactive programs)")
	return cmd
}

// splitProfile separates the optional PROFILE from the command: with "--"
// everything before it (at most one word) is the profile; without, the
// first word is the profile only if it names a configured profile and a
// command follows. Flags stop at the first argument (so the command's own
// flags are never lazaret's), which leaves a "--" after PROFILE in args.
func splitProfile(g *globalOptions, cmd *cobra.Command, args []string) (string, []string, error) {
	if cmd.ArgsLenAtDash() == 0 {
		if len(args) == 0 {
			return "", nil, usageError{errors.New("exec: no command after --")}
		}
		return "", args, nil
	}
	if len(args) >= 2 && args[1] == "--" {
		if len(args) == 2 {
			return "", nil, usageError{errors.New("exec: no command after --")}
		}
		return args[0], args[2:], nil
	}
	if len(args) > 1 && config.ValidProfileName(args[0]) == nil {
		if cfg, err := g.loadConfig(); err == nil {
			if _, known := cfg.Profiles[args[0]]; known {
				command, err := profileFlags(cmd, args[0], args[1:])
				return args[0], command, err
			}
		}
	}
	return "", args, nil
}

// profileFlags parses exec's own flags written after PROFILE
// (`exec dev -t -- vim`): up to the first word that is not a flag, or
// "--". A command after a profile never starts with "-".
func profileFlags(cmd *cobra.Command, profile string, rest []string) ([]string, error) {
	if !strings.HasPrefix(rest[0], "-") {
		return rest, nil
	}
	fs := cmd.Flags()
	if err := fs.Parse(rest); err != nil {
		return nil, usageError{fmt.Errorf("exec %s: %w", profile, err)}
	}
	if len(fs.Args()) == 0 {
		return nil, usageError{fmt.Errorf("exec %s: no command", profile)}
	}
	return fs.Args(), nil
}

// sessionRequest is one `shell` or `exec`.
type sessionRequest struct {
	profile string
	tty     bool
	command []string
	shell   bool
}

// interactiveShell runs bash when the image has it, else sh, as an
// interactive but not a login shell, like `podman exec -it ctr bash`: a
// login shell's /etc/profile resets PATH on Debian-based images, which
// would hide lazaret-escalate (/run/lazaret/bin) and the image's own ENV
// PATH from the agent.
var interactiveShell = []string{"/bin/sh", "-c", `if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi`}

// runSession attaches a Client Session to the sandbox (starting it if
// needed) and runs the command with podman exec in this process, so the
// command's streams never pass through the coordinator.
func runSession(ctx context.Context, g *globalOptions, r sessionRequest) error {
	if err := g.refuseRoot(); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	p, a, err := g.resolveDomain(cfg, r.profile, "")
	if err != nil {
		return err
	}
	if err := p.CheckEnv(); err != nil {
		return err
	}
	if err := g.gitPreflight(ctx, p, a); err != nil {
		return err
	}
	stdin, stdout, stderr := g.files()
	// The Session Anchor (its id is LAZARET_SESSION_ID) and this session's
	// escalation prompts, shown on the terminal only when the command runs
	// under a PTY (attach's gate hands the terminal over).
	gate := attach.NewGate()
	var promptTTY *os.File
	if r.tty && isTerminal(stdin) {
		promptTTY = stdin
	}
	var client *ctl.Client
	noticeGate := gate // network denial notices go between output lines
	if !r.tty {
		noticeGate = nil
	}
	// Q at a prompt stops the sandbox through client (sessionlink).
	link, err := sessionlink.New(sessionlink.Options{TTY: promptTTY, Pause: gate.Pause, Resume: gate.Resume,
		Notice: func(line string) { noticeGate.Notice(stderr, line) }})
	if err != nil {
		return err
	}
	defer link.Close()
	sessionID := link.SessionID()
	shown := r.command
	if r.shell {
		shown = []string{"shell"}
	}
	hello := ctl.Hello{Session: &ctl.SessionInfo{ID: sessionID, PID: os.Getpid(), Profile: p.Name, TTY: r.tty, Command: shown}}

	client = ctl.NewClient(g.log)
	link.Install(client)
	stop := make(chan struct{})
	var stopOnce sync.Once
	var reason string
	end := func(why string) {
		stopOnce.Do(func() { reason = why; close(stop) })
	}
	client.Handle(ctl.TypeShutdown, func(_ context.Context, req *ctl.Request) (any, error) {
		var sd ctl.Shutdown
		_ = req.Decode(&sd)
		end(sd.Reason)
		return nil, nil
	})
	args, err := g.coordinatorArgs(cfg, p.Name, a.Workspace)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer func() { cancel() }()
	announce := g.directModeAnnouncer(p, a)
	if err := g.startWithImage(ctx, p, func() error {
		// A fresh timeout for each attempt: a pull may come between.
		cancel()
		cctx, cancel = context.WithTimeout(ctx, connectTimeout)
		return coord.Connect(cctx, a, client, hello, coord.Spawn{Args: args}, g.log)
	}); err != nil {
		return sessionError(err, p.Name)
	}
	announce()
	defer client.Close()
	if err := link.Register(cctx, client); err != nil && !errors.Is(err, sessionlink.ErrDisabled) {
		return err
	}
	var spec ctl.ExecSpec
	if err := client.Call(cctx, ctl.TypeExecSpec, ctl.ExecSpecRequest{SessionID: sessionID, TTY: r.tty}, &spec); err != nil {
		return fmt.Errorf("asking the coordinator how to run the command: %w", err)
	}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	delegation, err := link.ExecDelegation(spec.Env)
	if err != nil {
		return err
	}
	var extra []*os.File // the holder's descriptor 3
	if delegation != nil {
		defer delegation.Close()
		extra = append(extra, delegation)
	}
	command := r.command
	if r.shell {
		command = interactiveShell
	}
	var pidFile string
	if !r.tty {
		// Without a terminal, signals have to be delivered inside the
		// sandbox (podman exec does not proxy them): the command records
		// its pid, then becomes the command (same pid, argv and stdio).
		pidFile = "/tmp/.lazaret-" + sessionID + ".pid"
		if !link.Holds() {
			command = append([]string{"/bin/sh", "-c", `echo $$ > "$0" 2>/dev/null; exec "$@"`, pidFile}, command...)
		}
	}
	// The session holder goes first: it keeps the delegated key from
	// every other session's processes, runs the command as its child and
	// records its pid.
	command = link.Command(command, pidFile)
	argv, err := podman.ExecArgs(podman.ExecOptions{
		Container: spec.Container, Interactive: true, TTY: r.tty,
		Env: spec.Env, Workdir: spec.Workdir, User: spec.User, Command: command,
		PreserveFDs: len(extra),
	})
	if err != nil {
		return err
	}
	go func() {
		<-client.Done()
		end("the session coordinator exited unexpectedly")
	}()
	pm := &podman.Client{Log: g.log}
	// Not tied to ctx: SIGINT is for the command (forwarded by attach),
	// not for lazaret.
	pc, err := pm.Cmd(context.Background(), argv, extra...)
	if err != nil {
		return err
	}
	opts := attach.Options{TTY: r.tty, Stdin: stdin, Stdout: stdout, Stderr: stderr, Stop: stop, Gate: gate}
	if pidFile != "" {
		opts.Signal = func(sig os.Signal) { signalInSandbox(pm, spec, pidFile, sig, g) }
	}
	code, err := attach.Run(pc, opts)
	link.WaitAbort() // a Q at a prompt: the stop is recorded before this session detaches
	if err != nil {
		return fmt.Errorf("podman exec: %w", err)
	}
	var grace <-chan time.Time // nil: do not wait
	if code == 128+int(syscall.SIGKILL) || code == podman.ExitPodmanError {
		// Killed, or podman failed: perhaps the container itself ended;
		// its coordinator notices within about a second and says so.
		grace = time.After(containerGoneWait)
	}
	select {
	case <-stop:
		// The sandbox went away under the command (lazaret stop, the
		// container or the coordinator died): not the command's own exit.
		return fmt.Errorf("session ended: %s", reason)
	default:
		if grace != nil {
			select {
			case <-stop:
				return fmt.Errorf("session ended: %s", reason)
			case <-grace:
			}
		}
	}
	syncAfterCommand(client, stderr, g)
	switch code {
	case 0:
		return nil
	case podman.ExitPodmanError:
		return withHint(errors.New("podman exec failed (exit 125; podman's message is above)"), exitFailure,
			"if the sandbox's container is gone or broken, "+verbLine("stop", p.Name)+" and run the command again")
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
	err := client.Call(ctx, ctl.TypeGitSync, nil, nil)
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

// signalInSandbox sends sig to the process whose pid the session's command
// recorded in pidFile, from a second podman exec in the same sandbox.
func signalInSandbox(pm *podman.Client, spec ctl.ExecSpec, pidFile string, sig os.Signal, g *globalOptions) {
	ss, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	name := strings.TrimPrefix(unix.SignalName(ss), "SIG")
	argv, err := podman.ExecArgs(podman.ExecOptions{
		Container: spec.Container, User: spec.User,
		Command: []string{"/bin/sh", "-c", `kill -s "$1" "$(cat "$0")"`, pidFile, name},
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

// coordinatorArgs are the arguments of the hidden __coordinator command
// for profile and workspace, carrying the global flags that matter.
func (g *globalOptions) coordinatorArgs(cfg *config.Config, profile, workspace string) ([]string, error) {
	args := []string{coordinatorCmdName}
	file := cfg.File
	if file != "" {
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, err
		}
		args = append(args, "--config", abs)
	}
	if g.verbose {
		args = append(args, "--verbose")
	}
	if g.allowRoot {
		args = append(args, "--allow-root")
	}
	return append(args, "--profile", profile, "--workspace", workspace), nil
}
