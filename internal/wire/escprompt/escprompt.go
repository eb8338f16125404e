// Package escprompt is the escalation prompt protocol between the
// coordinator's escalation server and the CLI's session link: the control
// socket messages (register a session, ask its human, withdraw a prompt),
// the prompt and its answer, and how both sides resolve an executable, so
// an edited command resolves on the human's screen as it will run. Both
// processes import it; it imports nothing of either.
package escprompt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
)

// SandboxBinDir is where lazaret's binaries are mounted in the sandbox;
// SandboxClient is the C escalation front end there, which also runs each
// session's holder; SandboxGoClient is the Go escalation client.
const (
	SandboxBinDir   = "/run/lazaret/bin"
	SandboxClient   = SandboxBinDir + "/lazaret-escalate"
	SandboxGoClient = SandboxBinDir + "/lazaret-escalate-go"
	// SandboxSessionDir is read-only and empty in the sandbox; an isolated
	// session's holder mounts a private tmpfs over it, in the session's
	// own mount namespace, for the session's socket (holder.c).
	SandboxSessionDir = "/run/lazaret/session"
	// SandboxPidDir is where isolated sessions' holders record the pid
	// the CLI signals (a session without a terminal); each session's
	// namespace has an empty read-only one in its place.
	SandboxPidDir = "/run/lazaret/pids"
	// signalVerb signals an isolated session (holder.c signal_main).
	signalVerb = "__signal"
)

// SignalCommand is the command, run in the sandbox's first namespace,
// that sends signal sig to the isolated session whose holder recorded its
// pid as SandboxPidDir/name: the read-only front end, never the image's
// kill (which the agent may have replaced).
func SignalCommand(name string, sig int) []string {
	return []string{SandboxClient, signalVerb, name, strconv.Itoa(sig)}
}

// IsolateFlag makes the session holder run its session in a PID and mount
// namespace of its own; the holder needs IsolationCaps for that and drops
// them before the session's command runs. NoKeyFlag: a command of
// lazaret's own, isolated the same way but with no delegation to read.
const (
	IsolateFlag = "--isolate"
	NoKeyFlag   = "--no-key"
)

// IsolationCaps are the capabilities the isolating holder is started with
// beyond the container's: SYS_ADMIN for the namespaces and mounts, SETPCAP
// to drop both from its bounding set again.
var IsolationCaps = []string{"CAP_SYS_ADMIN", "CAP_SETPCAP"}

// IsolatedCommand is argv run by the session holder in a PID and mount
// namespace of its own, without a delegation: how lazaret runs a command
// of its own in the sandbox (one that may run the agent's programs) so
// that it can neither see nor be seen by any session's processes.
func IsolatedCommand(argv []string) []string {
	return append([]string{SandboxClient, session.HolderVerb, IsolateFlag, NoKeyFlag, "--"}, argv...)
}

// Action is a human's answer to a prompt.
type Action int

// Actions.
const (
	Deny Action = iota
	Approve
	Abort // deny and stop lazaret (the CLI asks the coordinator to stop)
)

func (a Action) String() string {
	switch a {
	case Approve:
		return "approve"
	case Abort:
		return "abort"
	}
	return "deny"
}

// PromptRequest is what the human is shown.
type PromptRequest struct {
	RequestID     string   `json:"request_id"`
	Profile       string   `json:"profile"`
	Justification string   `json:"justification"`
	Cwd           string   `json:"cwd"`      // in the sandbox
	HostDir       string   `json:"host_dir"` // where it would run
	Command       string   `json:"command,omitempty"`
	Argv          []string `json:"argv,omitempty"` // nil when Command is not a simple command
	Executable    string   `json:"executable,omitempty"`
	Reason        string   `json:"reason"` // why it was not auto-approved
	// Path is the PATH the coordinator resolves and runs commands with, so
	// an edited command resolves on the human's screen as it will run.
	Path string `json:"path,omitempty"`
	// The session that asked, as its CLI announced it (command) and as the
	// coordinator saw it (pid from SO_PEERCRED, attach time).
	SessionID      string    `json:"session_id,omitempty"`
	SessionCommand []string  `json:"session_command,omitempty"`
	SessionPID     int       `json:"session_pid,omitempty"`
	SessionStarted time.Time `json:"session_started,omitzero"`
	// RequestHash is the SHA-256 (hex) of the request's canonical signed
	// encoding: `lazaret approvals` binds an answer to it.
	RequestHash string `json:"request_hash,omitempty"`
	// PendingID is the request's id in the coordinator's pending
	// approvals (`lazaret approvals show ID`).
	PendingID string `json:"pending_id,omitempty"`
	// AnswerElsewhere: the request may be answered from another terminal
	// ([escalation] answer_from = "any"), so a session without a
	// terminal leaves it pending instead of denying it at once.
	AnswerElsewhere bool `json:"answer_elsewhere,omitempty"`
	// Proposal: a policy rule the agent proposes (docs/POLICY.md), not a
	// command: Argv is [key, rule], Executable ProposalExecutable, Reason
	// the checker's findings; approving it runs nothing.
	Proposal bool `json:"proposal,omitempty"`
}

// ProposalExecutable stands for the executable of a proposal's prompt.
const ProposalExecutable = "(a policy rule: runs nothing)"

// Answer is the human's decision. For an edited command Argv is the new
// argument vector and Executable what it resolved to on the screen the
// human approved; the server resolves again and refuses a difference.
type Answer struct {
	Action Action `json:"action"`
	// Reason explains a denial that no human made (no terminal).
	Reason     string   `json:"reason,omitempty"`
	Argv       []string `json:"argv,omitempty"`
	Executable string   `json:"executable,omitempty"`
	// Where the answer came from, set by the coordinator's prompter for
	// the audit trail and never read from the wire (json:"-"): the
	// session's terminal or `lazaret approvals` (AnsweredFrom), the
	// answer_from setting in force (AnswerFrom), and whether the request
	// expired unanswered ([escalation] pending_timeout).
	AnsweredFrom string `json:"-"`
	AnswerFrom   string `json:"-"`
	Expired      bool   `json:"-"`
}

// Prompter asks the human of one session. It must return when ctx ends
// (the requester went away).
type Prompter interface {
	Prompt(ctx context.Context, r PromptRequest) (Answer, error)
}

// Control-socket messages of escalation.
const (
	// TypeRegister registers the Session Anchor's public key of the
	// attached session that sends it (CLI → coordinator): RegisterRequest,
	// answered by RegisterReply. Unknown to a coordinator whose escalation
	// is disabled.
	TypeRegister = "escalation.register"
	// TypePrompt asks the session's human (coordinator → CLI):
	// PromptRequest, answered by Answer.
	TypePrompt = "escalation.prompt"
	// TypePromptCancel withdraws a prompt whose request ended while it
	// was shown or queued (coordinator → CLI notification): PromptCancel.
	// The DNS prompt's withdrawal (ctl.NetPrompt) uses it too, with the
	// prompt's ID. (Reason is an added field: an older CLI ignores it and
	// withdraws as before; no API version change.)
	TypePromptCancel = "escalation.prompt_cancel"
)

// Why a prompt is withdrawn: the end of "the request ended (…)".
const (
	WithdrawClientGone = "its client went away"
	WithdrawExpired    = "expired"
	WithdrawAnswered   = "answered elsewhere"
	WithdrawStopping   = "the sandbox is stopping"
	WithdrawHungUp     = "terminal closed"
	// WithdrawAnsweredElsewhere: `lazaret approvals answer` answered it
	// from another terminal (answer_from = "any").
	WithdrawAnsweredElsewhere = "answered from another terminal"
	// WithdrawDetached: the kept session's terminal detached under a
	// network prompt, which cannot wait for the next attach.
	WithdrawDetached = "terminal detached"
)

// Withdrawn is the error of a prompt whose request ended before its human
// answered: the prompt was taken off the screen (and said so).
type Withdrawn struct{ Reason string }

func (w *Withdrawn) Error() string { return WithdrawnLine(w.Reason) }

// WithdrawnLine is the line a terminal shows when a prompt is withdrawn
// (without the "lazaret: " prefix).
func WithdrawnLine(reason string) string {
	return "prompt withdrawn: the request ended (" + reason + ")"
}

// WithdrawReason is why the request of ctx ended: the reason of a
// *Withdrawn cause, WithdrawExpired for a deadline, else WithdrawStopping
// (the server that asked is going away).
func WithdrawReason(ctx context.Context) string {
	cause := context.Cause(ctx)
	var w *Withdrawn
	switch {
	case errors.As(cause, &w):
		return w.Reason
	case errors.Is(cause, context.DeadlineExceeded):
		return WithdrawExpired
	}
	return WithdrawStopping
}

// RegisterRequest carries the session public key.
type RegisterRequest struct {
	PublicKey []byte `json:"public_key"`
}

// RegisterReply tells the CLI which sandbox its delegations must name.
type RegisterReply struct {
	SandboxID string `json:"sandbox_id"`
}

// PromptCancel withdraws the prompt of RequestID; Reason is one of the
// Withdraw* constants (empty from an older coordinator).
type PromptCancel struct {
	RequestID string `json:"request_id"`
	Reason    string `json:"reason,omitempty"`
}

// ErrNotExecutable is wrapped when argv[0] does not name an executable.
var ErrNotExecutable = errors.New("no such executable")

// Resolve returns the real absolute path of the executable argv0 names: a
// name with a slash is taken relative to dir, a bare name is looked up in
// the absolute entries of path; symlinks are resolved so the banned-name
// check and the prompt see the real binary.
func Resolve(argv0, dir, path string) (string, error) {
	var candidates []string
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		candidates = []string{p}
	} else {
		for _, d := range filepath.SplitList(path) {
			if filepath.IsAbs(d) {
				candidates = append(candidates, filepath.Join(d, argv0))
			}
		}
	}
	for _, c := range candidates {
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			continue
		}
		fi, err := os.Stat(real)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		return real, nil
	}
	return "", fmt.Errorf("%w: %q", ErrNotExecutable, argv0)
}

// SafePath returns path without empty or relative entries: those would
// resolve commands inside the agent-writable workspace.
func SafePath(path string) string {
	var keep []string
	for _, d := range filepath.SplitList(path) {
		if filepath.IsAbs(d) {
			keep = append(keep, d)
		}
	}
	if len(keep) == 0 {
		return "/usr/local/bin:/usr/bin:/bin"
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}
