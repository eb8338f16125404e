// Package sessionlink is the CLI's side of Host Escalation: it owns the
// Session Anchor of one `lazaret shell`/`exec`, registers its public key
// with the coordinator, answers the prompts the coordinator routes to this
// session on the CLI's own terminal, and hands each `podman exec` a fresh
// delegation. The session private key never leaves this process.
package sessionlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// Link is one Client Session's escalation state.
type Link struct {
	anchor    *session.Anchor
	runner    *prompt.Runner
	sandboxID string
	mu        sync.Mutex
	client    *ctl.Client // set by Install; the Q answer stops through it
	aborting  sync.WaitGroup
	opts      Options
	term      *termOwner
	// TTL of delegations; session.DefaultDelegationTTL when zero.
	TTL time.Duration
	// readDelay, when readDelaySet, replaces prompt.MinReadable in the
	// network prompt (tests only: 0 is the positive control).
	readDelay    time.Duration
	readDelaySet bool
	// nets are the network prompts being asked, by ID: their withdrawal
	// cancels them (with an *escprompt.Withdrawn cause).
	nets map[string]context.CancelCauseFunc
	// hungUp: the terminal went away (Hangup).
	hungUp bool
	// detached: the kept session's terminal is detached (SetAttached).
	detached bool
}

// Options of New.
type Options struct {
	// TTY is the terminal prompts are shown on; nil (or not a terminal)
	// denies every prompt.
	TTY *os.File
	// Pause and Resume suspend and restore the attached command's terminal
	// forwarding around a prompt (attach.Gate).
	Pause  func(flush func() error) io.Reader
	Resume func()
	// Abort runs when the human presses Q. Nil (the CLI) asks the
	// coordinator, on the connection given to Install, to stop the sandbox
	// as aborted from the escalation prompt (so the audit trail records
	// the human's Q, not a `lazaret stop`); see WaitAbort.
	Abort func()
	// Notice prints one line of lazaret's own (a network denial) between
	// the command's output lines (attach.Gate.Notice); nil drops them.
	Notice func(line string)
	// Discard drops the terminal's input for a while instead of
	// forwarding it (attach.Gate.Discard): called, before Resume, when a
	// prompt left the screen because its request ended, so the keys typed
	// for it never reach the sandbox. Nil: nothing is dropped.
	Discard func(time.Duration)
}

// New makes the Session Anchor. Use SessionID as the hello's session id.
func New(o Options) (*Link, error) {
	a, err := session.New()
	if err != nil {
		return nil, err
	}
	t := newTermOwner()
	l := &Link{anchor: a, opts: o, term: t}
	l.runner = &prompt.Runner{TTY: o.TTY, OnAbort: o.Abort, Pause: t.escalationPause(o.Pause), Resume: t.escalationResume(o.Resume),
		Resolve: prompt.ResolveAsServer, Discard: o.Discard}
	return l, nil
}

// stopAborted asks the coordinator to stop the sandbox because the human
// answered Q. It is called before the answer is sent back, so the request
// is on its way before the denied command can end the session (a session
// ending first would be audited as "the last session ended"); the call
// itself runs beside the reply, which the coordinator needs to finish the
// request before it tears down.
func (l *Link) stopAborted() {
	l.mu.Lock()
	c := l.client
	l.mu.Unlock()
	if c == nil {
		return
	}
	l.aborting.Add(1)
	go func() {
		defer l.aborting.Done()
		_ = c.Stop(context.Background(), ctl.StopRequest{Cause: ctl.StopCauseEscalationAbort})
	}()
}

// WaitAbort waits until a stop asked by a Q answer has been answered (the
// sandbox is gone) or the connection closed; the CLI calls it when the
// command ends, before it detaches.
func (l *Link) WaitAbort() { l.aborting.Wait() }

// SessionID is LAZARET_SESSION_ID.
func (l *Link) SessionID() string { return l.anchor.ID }

// Install registers the prompt handlers on c; call it before Connect.
func (l *Link) Install(c *ctl.Client) {
	l.mu.Lock()
	l.client = c
	l.mu.Unlock()
	c.Handle(escprompt.TypePrompt, func(ctx context.Context, req *ctl.Request) (any, error) {
		var pr escprompt.PromptRequest
		if err := req.Decode(&pr); err != nil {
			return nil, err
		}
		a, err := l.runner.Prompt(ctx, pr)
		if err != nil && a.Reason == "" {
			a.Reason = err.Error()
		}
		if a.Action == escprompt.Abort && l.runner.OnAbort == nil {
			l.stopAborted()
		}
		return &a, nil
	})
	c.Handle(escprompt.TypePromptCancel, func(ctx context.Context, req *ctl.Request) (any, error) {
		var pc escprompt.PromptCancel
		if err := req.Decode(&pc); err != nil {
			return nil, err
		}
		reason := pc.Reason
		if reason == "" {
			reason = escprompt.WithdrawClientGone // an older coordinator
		}
		if !l.withdrawNet(pc.RequestID, reason) {
			l.runner.Withdraw(pc.RequestID, reason)
		}
		return nil, nil
	})
	l.installNet(c)
}

// Close withdraws pending prompts and waits until the terminal is
// restored; call it before the CLI exits.
func (l *Link) Close() { l.runner.Close() }

// Hangup is the terminal going away (attach.Gate.OnHangUp): every prompt
// shown or queued on it, and any later one, is denied with the reason
// "terminal closed" at once, not left for its requester to give up on.
func (l *Link) Hangup() {
	l.runner.DenyAll(escprompt.WithdrawHungUp)
	l.mu.Lock()
	l.hungUp = true
	nets := l.nets
	l.nets = nil
	l.mu.Unlock()
	for _, cancel := range nets {
		cancel(&escprompt.Withdrawn{Reason: escprompt.WithdrawHungUp})
	}
}

// SetAttached is a kept session's terminal attaching or detaching
// (internal/clicore/keeper). While detached no prompt is drawn: an
// escalation prompt on the screen is taken down and waits, unanswered,
// with the others (pending in the coordinator, where `lazaret approvals`
// lists them); on attach each is drawn again with a fresh readability
// clock (prompt.Runner.SetAttached). A network prompt cannot wait longer
// than its held lookup: one on the screen is withdrawn, and none is
// drawn while detached (the coordinator may still have it answered
// elsewhere until the lookup gives up).
func (l *Link) SetAttached(attached bool) {
	l.mu.Lock()
	l.detached = !attached
	var nets map[string]context.CancelCauseFunc
	if !attached {
		nets, l.nets = l.nets, nil
	}
	l.mu.Unlock()
	for _, cancel := range nets {
		cancel(&escprompt.Withdrawn{Reason: escprompt.WithdrawDetached})
	}
	l.runner.SetAttached(attached)
}

// ErrDisabled is returned by Register when the coordinator has no
// escalation (disabled in the config).
var ErrDisabled = errors.New("host escalation is disabled")

// Register sends the session public key on the attached connection c.
func (l *Link) Register(ctx context.Context, c *ctl.Client) error {
	reply, err := c.RegisterEscalation(ctx, escprompt.RegisterRequest{PublicKey: l.anchor.Public})
	if errors.Is(err, ctl.ErrUnknownType) {
		return ErrDisabled
	}
	if err != nil {
		return fmt.Errorf("registering the session for host escalation: %w", err)
	}
	l.sandboxID = reply.SandboxID
	return nil
}

// Holds reports whether this session's commands run under a session
// holder (Command): escalation is enabled and the session registered.
func (l *Link) Holds() bool { return l.sandboxID != "" }

// Command returns the command a `podman exec` of this session runs: with
// a registration, command under the session holder (the in-sandbox C
// front end in holder mode), which reads the delegation ExecDelegation
// passes on descriptor 3 and keeps it where other sessions' processes
// cannot read it, and, when pidFile is set, records the command's pid
// there; without one (escalation disabled), command itself.
func (l *Link) Command(command []string, pidFile string) []string {
	if !l.Holds() {
		return command
	}
	argv := []string{escprompt.SandboxClient, session.HolderVerb, escprompt.IsolateFlag}
	if pidFile != "" {
		argv = append(argv, "--pidfile", pidFile)
	}
	return append(append(argv, "--"), command...)
}

// ExecDelegation makes a fresh delegation for one `podman exec`: it adds
// the (public) session id to env and returns the holder's descriptor 3
// (`podman exec --preserve-fds 1`), a socket holding the delegation's
// NAME=VALUE lines, key included (session.Delegated.Channel): the key is
// in no argv, environment or file. Without a registration (escalation
// disabled) it returns nil and adds nothing.
func (l *Link) ExecDelegation(env map[string]string) (*os.File, error) {
	d, err := l.delegate()
	if d == nil || err != nil {
		return nil, err
	}
	env[session.EnvSessionID] = d.SessionID
	return d.Channel()
}

// delegate makes a fresh delegation, nil without a registration.
func (l *Link) delegate() (*session.Delegated, error) {
	if l.sandboxID == "" {
		return nil, nil
	}
	ttl := l.TTL
	if ttl <= 0 {
		ttl = session.DefaultDelegationTTL
	}
	return l.anchor.Delegate(l.sandboxID, ttl, time.Now())
}
