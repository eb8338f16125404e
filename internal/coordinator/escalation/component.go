// Package escalation is the coordinator's Host Escalation component: the
// Trust Anchor and TLS directory of one sandbox, its escalation socket served
// by the shared internal/escalation server, the client's mounts and broker,
// and the session registrations arriving on the control socket.
package escalation

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/unixsock"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// Paths inside the sandbox.
const (
	SandboxTLSDir = "/run/lazaret/tls"
	SandboxSocket = "/run/lazaret/escalate.sock"
	SandboxBinDir = escprompt.SandboxBinDir
	// SandboxClient is lazaret-escalate, the small C front end that hands
	// each request to the broker; SandboxGoClient is the Go client, which
	// runs as the broker and which the front end execs when the broker
	// cannot be reached.
	SandboxClient   = escprompt.SandboxClient
	SandboxGoClient = escprompt.SandboxGoClient
	// SandboxBrokerDir is a tmpfs, empty at every start, for the broker's
	// socket SandboxBrokerSocket (internal/insandbox/escclient's
	// DefaultBrokerSocket).
	SandboxBrokerDir    = "/run/lazaret/escalate-broker"
	SandboxBrokerSocket = SandboxBrokerDir + "/sock"
	// brokerVerb starts the Go client as the broker.
	brokerVerb = "__broker"
	// defaultPath is the PATH of a Debian-like image, used when the spec
	// sets none (podman would otherwise keep the image's).
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// ComponentOptions configure the escalation component.
type ComponentOptions struct {
	// Disabled turns the component into a no-op ([escalation] enabled =
	// false): no socket, no mounts, and the control socket does not know
	// TypeRegister, so CLIs skip registration.
	Disabled bool
	Anchor   *domain.Anchor
	// AutoApprove are the config's parsed auto_approve entries.
	AutoApprove [][]string
	// Server is the control socket (session registration, prompts).
	Server  *ctlserver.Server
	Auditor eschost.Auditor
	Log     *slog.Logger
	// Podman starts the broker in the running container; a default
	// client when nil.
	Podman *podman.Client
	// Approvals, when set, registers every prompt as a pending request
	// (`lazaret approvals`); PendingTimeout ([escalation]
	// pending_timeout, 0: none) denies one left unanswered that long.
	Approvals      *approvals.Hub
	PendingTimeout time.Duration
	// Proposals serves the agent's policy proposals (proposals.go).
	Proposals eschost.ProposalHandler
}

// Component runs Host Escalation beside one sandbox: the Trust Anchor and
// its TLS directory, the escalation socket and its server, the mounts of
// the client, and the session registrations arriving on the control
// socket. It implements sandbox.Component.
type Component struct {
	o        ComponentOptions
	registry *eschost.Registry
	// policy is the auto-approve engine, live: an approved exec proposal
	// joins it.
	policy *eschost.Policy

	mu     sync.Mutex
	anchor *trust.Anchor
	ln     net.Listener
	cancel context.CancelFunc
	done   chan struct{}
	server *eschost.Server
	// brokerCancel stops a broker start still waiting or under way.
	brokerCancel context.CancelFunc
}

// FromConfig returns the component for a coordinator's configuration.
func FromConfig(cfg *config.Config, a *domain.Anchor, srv *ctlserver.Server, auditor eschost.Auditor, log *slog.Logger) *Component {
	return NewComponent(ComponentOptions{Disabled: !cfg.Escalation.Enabled, Anchor: a,
		AutoApprove: cfg.Escalation.AutoApprove, Server: srv, Auditor: auditor, Log: log})
}

// WithApprovals registers every prompt with hub and denies one left
// unanswered for timeout (0: it waits until answered or the sandbox
// stops). Call it before Prepare.
func (c *Component) WithApprovals(hub *approvals.Hub, timeout time.Duration) *Component {
	c.o.Approvals, c.o.PendingTimeout = hub, timeout
	return c
}

// NewComponent returns the component; nothing happens before Prepare.
func NewComponent(o ComponentOptions) *Component {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Auditor == nil {
		o.Auditor = LogAuditor(o.Log)
	}
	if o.Podman == nil {
		o.Podman = &podman.Client{Log: o.Log}
	}
	return &Component{o: o, registry: eschost.NewRegistry(), policy: &eschost.Policy{AutoApprove: o.AutoApprove}}
}

// Name implements sandbox.Component.
func (c *Component) Name() string { return "escalation" }

// Registry is where sessions are registered (tests register directly).
func (c *Component) Registry() *eschost.Registry { return c.registry }

// SandboxID is the id in the sandbox's certificate SAN and in every
// delegation: the Domain Anchor hash (one sandbox per domain).
func (c *Component) SandboxID() string { return c.o.Anchor.Hash }

// Prepare starts the Trust Anchor, writes the TLS directory, listens on the
// escalation socket (0600 in a 0700 socket_dir) and adds the mounts: TLS
// directory read-only at /run/lazaret/tls (a directory mount, so rotated
// files are seen), the socket at /run/lazaret/escalate.sock, the C front
// end read-only at /run/lazaret/bin/lazaret-escalate and the Go client at
// /run/lazaret/bin/lazaret-escalate-go, a small tmpfs for the broker's
// socket at /run/lazaret/escalate-broker, and /run/lazaret/bin on PATH.
func (c *Component) Prepare(ctx context.Context, spec *podman.ContainerSpec) error {
	if c.o.Disabled {
		return nil
	}
	a := c.o.Anchor
	client, err := locate.Find(locate.Escalate)
	if err != nil {
		return err
	}
	goClient, err := findGoClient(client)
	if err != nil {
		return err
	}
	if err := domain.EnsurePrivateDir(a.SocketDir); err != nil {
		return fmt.Errorf("escalation socket_dir: %w", err)
	}
	ta, err := trust.Start(trust.Options{Dir: a.TLSDir(), Profile: a.Profile, SandboxID: a.Hash,
		OnError: func(err error) { c.o.Log.Error("trust anchor", "err", err) }})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.anchor = ta
	c.mu.Unlock()
	ln, err := listenPrivate(a.EscalationSocket())
	if err != nil {
		return err
	}
	home, _ := os.UserHomeDir()
	c.policy.Path, c.policy.Workspace = escprompt.SafePath(os.Getenv("PATH")), a.Workspace
	srv := eschost.NewServer(eschost.Config{
		Profile: a.Profile, SandboxID: a.Hash, Workspace: a.Workspace, Registry: c.registry,
		Policy:   c.policy,
		Executor: &eschost.Executor{Env: eschost.MinimalEnv(os.Getenv("PATH"), home, os.Getenv("LANG"))},
		Auditor:  c.o.Auditor, Log: c.o.Log, Proposals: c.o.Proposals,
	}, ta.ServerConfig())
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	c.mu.Lock()
	c.ln, c.cancel, c.done, c.server = ln, cancel, done, srv
	c.mu.Unlock()
	go func() {
		defer close(done)
		if err := srv.Serve(sctx, ln); err != nil {
			c.o.Log.Error("escalation socket", "err", err)
		}
	}()
	if c.o.Server != nil {
		c.o.Server.Handle(escprompt.TypeRegister, c.handleRegister)
	}
	spec.Mounts = append(spec.Mounts,
		podman.Mount{Type: "bind", Source: a.TLSDir(), Target: SandboxTLSDir, ReadOnly: true},
		podman.Mount{Type: "bind", Source: a.EscalationSocket(), Target: SandboxSocket},
		podman.Mount{Type: "bind", Source: client, Target: SandboxClient, ReadOnly: true},
		podman.Mount{Type: "bind", Source: goClient, Target: SandboxGoClient, ReadOnly: true},
		podman.Mount{Type: "tmpfs", Target: SandboxBrokerDir, Options: []string{"tmpfs-size=64k", "tmpfs-mode=755"}},
		// Read-only and empty here; each isolated session mounts its own
		// private tmpfs over it for its socket.
		podman.Mount{Type: "tmpfs", Target: escprompt.SandboxSessionDir, ReadOnly: true, Options: []string{"tmpfs-size=4k", "tmpfs-mode=755"}},
		// The pids the CLI signals, seen only by the sandbox's first
		// namespace (each session's holder hides it in the session's).
		podman.Mount{Type: "tmpfs", Target: escprompt.SandboxPidDir, Options: []string{"tmpfs-size=64k", "tmpfs-mode=1777"}},
	)
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	path := spec.Env["PATH"]
	if path == "" {
		path = defaultPath
	}
	if !strings.Contains(":"+path+":", ":"+SandboxBinDir+":") {
		spec.Env["PATH"] = path + ":" + SandboxBinDir
	}
	return nil
}

// findGoClient finds lazaret-escalate-go: where locate looks, else beside
// the front end (an override of LAZARET_ESCALATE alone, as in tests).
func findGoClient(frontEnd string) (string, error) {
	p, err := locate.Find(locate.EscalateGo)
	if err == nil {
		return p, nil
	}
	if p, err2 := filepath.Abs(filepath.Join(filepath.Dir(frontEnd), locate.EscalateGo)); err2 == nil {
		if fi, err2 := os.Stat(p); err2 == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", err
}

// Started implements sandbox.Component: it starts the escalation broker
// in the container, off the start path (a podman exec costs a few hundred
// ms). Until the broker listens, and if it dies, lazaret-escalate runs the
// Go client itself, as it did before the broker existed.
func (c *Component) Started(ctx context.Context, container string) error {
	if c.o.Disabled {
		return nil
	}
	bctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c.mu.Lock()
	c.brokerCancel = cancel
	c.mu.Unlock()
	go func() {
		defer cancel()
		// Not at once: its podman exec (a few hundred ms of CPU) would
		// compete with the first session's own on a small machine
		// (measured on the cold start). Until the broker listens,
		// lazaret-escalate runs the Go client.
		select {
		case <-bctx.Done():
			return
		case <-time.After(BrokerStartDelay):
		}
		if err := c.StartBroker(bctx, container); err != nil && bctx.Err() == nil {
			c.o.Log.Warn("escalation broker did not start; lazaret-escalate runs the Go client each time", "err", err)
		}
	}()
	return nil
}

// BrokerStartDelay is how long after the container's start the broker is
// started.
const BrokerStartDelay = 2 * time.Second

// StartBroker starts the broker in the running container and returns
// once podman has started it (not once it listens). It runs detached for
// the container's life, as the container's user.
func (c *Component) StartBroker(ctx context.Context, container string) error {
	return c.o.Podman.ExecDetached(ctx, container, SandboxGoClient, brokerVerb, SandboxBrokerSocket)
}

// Close stops the server (killing commands in flight), removes the socket
// and the TLS directory. Safe to call more than once.
func (c *Component) Close(ctx context.Context) error {
	c.mu.Lock()
	cancel, done, ta := c.cancel, c.done, c.anchor
	c.cancel, c.anchor = nil, nil
	if c.brokerCancel != nil {
		c.brokerCancel()
		c.brokerCancel = nil
	}
	c.mu.Unlock()
	var errs []error
	if cancel != nil {
		cancel()
		<-done
		if err := os.Remove(c.o.Anchor.EscalationSocket()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if ta != nil {
		errs = append(errs, ta.Close())
	}
	return errors.Join(errs...)
}

// listenPrivate listens on a UNIX socket at path with mode 0600. A stale
// socket (left by a killed coordinator; the coordinator holds the domain
// lock, so no live one can own it) is removed first; any other file there
// is an error.
func listenPrivate(path string) (net.Listener, error) {
	ln, err := unixsock.ListenReplacing(path)
	if err != nil {
		return nil, fmt.Errorf("escalation socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	return ln, nil
}

// handleRegister registers the calling session's public key; the
// registration ends with the session's control connection.
func (c *Component) handleRegister(ctx context.Context, r *ctlserver.Request) (any, error) {
	if r.Session == nil {
		return nil, ctl.Errorf(ctl.ErrNoSession.Code, "%s needs an attached session", escprompt.TypeRegister)
	}
	var req escprompt.RegisterRequest
	if err := r.Decode(&req); err != nil {
		return nil, err
	}
	if len(req.PublicKey) != ed25519.PublicKeySize {
		return nil, ctl.Errorf(ctl.ErrBadRequest.Code, "%s: public_key must be an Ed25519 key", escprompt.TypeRegister)
	}
	sess := r.Session
	unregister, err := c.registry.Register(&eschost.Session{ID: sess.ID, Public: ed25519.PublicKey(req.PublicKey), Prompt: newPrompter(sess, c.o.Approvals, c.o.PendingTimeout),
		Command: sess.Command, PID: sess.PeerPID, Started: sess.Attached})
	if err != nil {
		return nil, ctl.Errorf(ctl.ErrBadRequest.Code, "%s: %v", escprompt.TypeRegister, err)
	}
	go func() {
		<-sess.Done()
		unregister()
	}()
	c.o.Log.Info("escalation session registered", "session", sess.ID)
	return &escprompt.RegisterReply{SandboxID: c.SandboxID()}, nil
}

// newPrompter asks the human of one session: on its terminal over its
// control connection and, through the approvals hub when there is one,
// whoever answers `lazaret approvals` first (answer_from = "any"); the
// same prompter as a lazaret-kube session's, with the terminal reached
// over the control socket.
func newPrompter(s *ctlserver.Session, hub *approvals.Hub, timeout time.Duration) *approvals.Prompter {
	return &approvals.Prompter{Hub: hub, Terminal: sessionTerminal{s}, Timeout: timeout,
		Session: func() (string, []string) { return s.ID, s.Command }}
}

// sessionTerminal is a session's own terminal, reached over its control
// connection.
type sessionTerminal struct{ s *ctlserver.Session }

// Prompt asks the session's CLI. When the request ends first (its client
// went away, the sandbox stops, another answer came first: the context's
// cause says which), the prompt leaves the terminal and says why.
func (t sessionTerminal) Prompt(ctx context.Context, r escprompt.PromptRequest) (escprompt.Answer, error) {
	var a escprompt.Answer
	err := t.s.Call(ctx, escprompt.TypePrompt, r, &a)
	if ctx.Err() != nil {
		reason := escprompt.WithdrawReason(ctx)
		_ = t.s.Notify(escprompt.TypePromptCancel, escprompt.PromptCancel{RequestID: r.RequestID, Reason: reason})
		return escprompt.Answer{Action: escprompt.Deny}, &escprompt.Withdrawn{Reason: reason}
	}
	if err != nil {
		return escprompt.Answer{Action: escprompt.Deny}, fmt.Errorf("asking the session: %w", err)
	}
	return a, nil
}

// RotateNow rotates the sandbox's client certificate at once (tests; the
// Trust Anchor rotates on its own schedule).
func (c *Component) RotateNow() error {
	c.mu.Lock()
	ta := c.anchor
	c.mu.Unlock()
	if ta == nil {
		return errors.New("escalation component not prepared")
	}
	return ta.Rotate()
}

// LogAuditor writes audit events to the coordinator log (used when no
// state store is wired).
func LogAuditor(log *slog.Logger) eschost.Auditor {
	return eschost.AuditFunc(func(_ context.Context, e eschost.Event) error {
		log.Info("audit", "kind", e.Kind, "stage", e.Stage, "reason", e.Reason, "request", e.RequestID,
			"session", e.SessionID, "argv", e.Argv, "command", e.Command, "decision", e.Decision, "exit", e.ExitCode)
		return nil
	})
}
