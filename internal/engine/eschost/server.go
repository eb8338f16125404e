package eschost

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

// SandboxWorkspace is where the Agent Workspace is mounted in the sandbox;
// a request's cwd below it maps to the same place below the host workspace.
const SandboxWorkspace = domain.SandboxWorkspace

// Config configures a Server.
type Config struct {
	Profile   string
	SandboxID string
	// Workspace is the host workspace (the Domain Anchor's canonical
	// workspace); commands run in it, or in the directory below it that
	// matches the request's cwd below /workspace. In branch mode that is
	// the user's own working tree, which the agent cannot write.
	Workspace string
	Registry  *Registry
	Policy    *Policy
	Executor  *Executor
	Auditor   Auditor
	Log       *slog.Logger
	// Proposals serves the proposal loop's requests (proposals.go); nil:
	// every one is refused.
	Proposals ProposalHandler
	// Now replaces time.Now in tests.
	Now func() time.Time
}

// Server serves the escalation socket.
type Server struct {
	cfg    Config
	tls    *tls.Config
	san    string
	replay *replayCache
	limit  rateLimiter
	wg     sync.WaitGroup
	// conns bounds the connections served at once and prompts the requests
	// waiting for a human, so a sandbox cannot exhaust the coordinator or
	// bury its human under a queue of prompts.
	conns   chan struct{}
	prompts chan struct{}
}

// Limits of one sandbox.
const (
	MaxConnections   = 32
	MaxPendingPrompt = 8
)

// ConnWait is how long a connection beyond MaxConnections waits for one
// to end before it is refused: hundreds of requests at once (measured:
// 300 from one sandbox) are served in turn instead of failing with a
// broken handshake, and the sandbox's flood only delays its own requests.
const ConnWait = 10 * time.Second

// takeSlot takes one of the MaxConnections slots, waiting up to ConnWait.
func (s *Server) takeSlot(ctx context.Context) bool {
	select {
	case s.conns <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(ConnWait)
	defer t.Stop()
	select {
	case s.conns <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// NewServer returns a server using tlsConf (from the Trust Anchor).
func NewServer(cfg Config, tlsConf *tls.Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Auditor == nil {
		cfg.Auditor = AuditFunc(func(context.Context, Event) error { return nil })
	}
	return &Server{cfg: cfg, tls: tlsConf, san: trust.SAN(cfg.Profile, cfg.SandboxID), replay: newReplayCache(),
		conns: make(chan struct{}, MaxConnections), prompts: make(chan struct{}, MaxPendingPrompt)}
}

// Serve accepts connections on ln until ctx ends, then closes ln and waits
// for the connections in flight (their commands are killed by ctx).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	defer s.wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("escalation: accept: %w", err)
		}
		if !s.takeSlot(ctx) {
			s.cfg.Log.Warn("escalation: too many connections, refusing one")
			_ = c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.conns }()
			s.Handle(ctx, c)
		}()
	}
}

// Rejection is a failed verification: the stage and the reason, which go
// to the audit trail only.
type Rejection struct {
	Stage  string
	Reason string
}

func (r *Rejection) Error() string { return r.Stage + ": " + r.Reason }

// Verify runs the verification pipeline on one request line received on a
// connection whose TLS state is cs, in the order of DESIGN §10: mTLS + SAN,
// (decoding), session known, delegation valid and unexpired for this
// sandbox, request signature, replay. Policy comes after, in Handle.
func (s *Server) Verify(cs tls.ConnectionState, line []byte) (*escwire.Request, *Session, *Rejection) {
	if san := trust.PeerSAN(cs); cs.Version != tls.VersionTLS13 || san != s.san {
		return nil, nil, &Rejection{StageMTLS, fmt.Sprintf("peer SAN %q, want %q", san, s.san)}
	}
	req, err := escwire.Decode(line)
	if err != nil {
		return nil, nil, &Rejection{StageDecode, err.Error()}
	}
	if req.Profile != s.cfg.Profile {
		return req, nil, &Rejection{StageDecode, fmt.Sprintf("profile %q does not match the certificate's %q", req.Profile, s.cfg.Profile)}
	}
	sess, ok := s.cfg.Registry.Lookup(req.SessionID)
	if !ok {
		return req, nil, &Rejection{StageSession, "unknown session " + req.SessionID}
	}
	now := s.cfg.Now()
	if err := req.Delegation.Verify(sess.Public, req.SessionID, s.cfg.SandboxID, now); err != nil {
		return req, nil, &Rejection{StageDelegation, err.Error()}
	}
	if !req.VerifySignature() {
		return req, nil, &Rejection{StageSignature, "request signature does not verify under the delegated key"}
	}
	if reason := s.replay.check(req.RequestID, req.Nonce, time.UnixMilli(req.Timestamp), now); reason != "" {
		return req, nil, &Rejection{StageReplay, reason}
	}
	return req, sess, nil
}

// handshakeTimeout bounds the TLS handshake and reading the request.
const handshakeTimeout = 10 * time.Second

// Handle serves one connection.
func (s *Server) Handle(ctx context.Context, raw net.Conn) {
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	tc := tls.Server(raw, s.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// The peer hung up before authenticating, asking nothing: a
			// session's signer killed with its session while it
			// handshook a warm connection ahead (through a cluster
			// sandbox's relay that takes several round trips). A
			// certificate or protocol failure is another error.
			s.cfg.Log.Debug("escalation connection closed during the handshake")
			return
		}
		s.reject(ctx, nil, &Rejection{StageMTLS, "TLS handshake: " + err.Error()})
		return
	}
	line, err := bufio.NewReaderSize(io.LimitReader(tc, escwire.MaxRequest+1), 4096).ReadBytes('\n')
	if err != nil && len(line) == 0 && (errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded)) {
		// An authenticated connection that ended or timed out before sending
		// a single byte asked nothing: the in-sandbox broker keeps one such
		// connection handshaken ahead of the next request and lets it lapse.
		// There is no request to audit; anything sent is decoded and judged.
		s.cfg.Log.Debug("escalation connection closed without a request", "err", err)
		return
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		s.reject(ctx, nil, &Rejection{StageDecode, "reading request: " + err.Error()})
		return
	}
	_ = raw.SetDeadline(time.Time{})
	out := &frameWriter{enc: json.NewEncoder(tc)}
	req, sess, rej := s.Verify(tc.ConnectionState(), line)
	if rej != nil {
		s.reject(ctx, req, rej)
		out.send(escwire.Frame{Type: escwire.FrameError, Message: escwire.GenericRejection})
		return
	}
	// The client sends nothing after its request; a read returning means
	// it hung up (or its --timeout expired): stop prompting or running.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		_, _ = io.Copy(io.Discard, tc)
		cancel(&escprompt.Withdrawn{Reason: escprompt.WithdrawClientGone})
	}()
	if req.Kind != escwire.KindEscalate {
		s.serveLoop(ctx, req, sess, out)
		return
	}
	s.serve(ctx, req, sess, out)
}

func (s *Server) serve(ctx context.Context, req *escwire.Request, sess *Session, out *frameWriter) {
	base := Event{RequestID: req.RequestID, SessionID: req.SessionID, Profile: req.Profile, Cwd: req.Cwd,
		Argv: req.Argv, Command: req.Command, Justification: req.Justification}
	dir, hostDir, forcePrompt, err := s.openDir(req.Cwd)
	if err != nil {
		s.reject(ctx, req, &Rejection{StagePolicy, err.Error()})
		out.send(escwire.Frame{Type: escwire.FrameError, Message: escwire.GenericRejection})
		return
	}
	defer dir.Close()
	v := s.cfg.Policy.Evaluate(req.Argv, req.Command, hostDir)
	if v.Auto && forcePrompt != "" {
		v.Auto, v.Reason = false, forcePrompt
	}
	ev := base
	ev.Kind, ev.Executable, ev.Reason = EventRequest, v.Executable, v.Reason
	s.audit(ctx, ev)
	if v.Auto {
		dec := base
		dec.Kind, dec.Decision, dec.Rule, dec.Argv, dec.Executable = EventDecision, DecisionAuto, v.Rule, v.Argv, v.Executable
		s.audit(ctx, dec)
	}

	argv, exe := v.Argv, v.Executable
	if !v.Auto {
		var ok bool
		if argv, exe, ok = s.askHuman(ctx, req, sess, v, hostDir, base, out); !ok {
			return
		}
	}
	full := append([]string{exe}, argv[1:]...)
	res, err := s.cfg.Executor.Run(ctx, exe, full, dir, out.stream(escwire.FrameStdout), out.stream(escwire.FrameStderr))
	r := base
	r.Kind, r.Executable, r.Argv = EventResult, exe, full
	if err != nil {
		r.Reason = err.Error()
		s.audit(ctx, r)
		out.send(escwire.Frame{Type: escwire.FrameError, Message: "the host command could not be started"})
		return
	}
	code := res.ExitCode
	r.ExitCode, r.Duration, r.TimedOut, r.Truncated = &code, res.Duration, res.TimedOut, res.Truncated
	r.StdoutBytes, r.StderrBytes, r.StdoutSHA256, r.StderrSHA256 = res.StdoutBytes, res.StderrBytes, res.StdoutSHA256, res.StderrSHA256
	s.audit(ctx, r)
	if res.TimedOut {
		out.send(escwire.Frame{Type: escwire.FrameStderr, Data: []byte("lazaret: host command killed at its time limit\n")})
	}
	if res.Truncated {
		out.send(escwire.Frame{Type: escwire.FrameStderr, Data: []byte("lazaret: host command output truncated\n")})
	}
	out.send(escwire.Frame{Type: escwire.FrameExit, Code: code})
}

// askHuman shows a request that was not auto-approved to the session's
// human and returns what to run; ok is false when a denial was sent.
func (s *Server) askHuman(ctx context.Context, req *escwire.Request, sess *Session, v Verdict, hostDir string, base Event, out *frameWriter) (argv []string, exe string, ok bool) {
	argv, exe = v.Argv, v.Executable
	if sess.Prompt == nil {
		// Nobody can be asked: say so before anything suggests a wait.
		dec := base
		dec.Kind, dec.Argv, dec.Executable = EventDecision, v.Argv, v.Executable
		dec.Decision, dec.Reason = DecisionDenied, ErrNoPrompter.Error()
		s.audit(ctx, dec)
		out.send(escwire.Frame{Type: escwire.FrameDenied, Message: NoTerminalDenial + ": " + v.Reason})
		return nil, "", false
	}
	ans, err := s.askAnnounced(ctx, sess, out, v, s.promptRequest(req, sess, v, hostDir))
	dec := base
	dec.Kind, dec.Argv, dec.Executable = EventDecision, v.Argv, v.Executable
	// Where the human was asked: the asking session's own terminal;
	// AnsweredFrom says where the answer came from (that terminal, or
	// `lazaret approvals` with answer_from = "any"). A withdrawal's
	// reason says it was not answered there.
	dec.AskedOn = "terminal of session " + sess.ID
	dec.AnsweredFrom, dec.AnswerFrom, dec.Expired = ans.AnsweredFrom, ans.AnswerFrom, ans.Expired
	switch {
	case ans.Action == escprompt.Approve && ans.Argv != nil:
		dec.Decision, dec.Argv, dec.Executable = DecisionEdited, ans.Argv, ans.Executable
	case ans.Action == escprompt.Approve:
		dec.Decision = DecisionApproved
	case ans.Action == escprompt.Abort:
		dec.Decision, dec.Reason = DecisionDenied, ReasonAbortedByUser
	default:
		dec.Decision, dec.Reason = DecisionDenied, "denied by the user"
	}
	if ans.Reason != "" {
		dec.Reason = ans.Reason
	}
	if err != nil {
		dec.Reason = err.Error()
	}
	s.audit(ctx, dec)
	switch {
	case ans.Action == escprompt.Abort:
		out.send(escwire.Frame{Type: escwire.FrameDenied, Message: "denied: " + ReasonAbortedByUser + "; lazaret is stopping the sandbox"})
		return nil, "", false
	case ans.Action != escprompt.Approve:
		msg := "denied by the user"
		if ans.Reason != "" {
			msg = "denied: " + ans.Reason
		}
		if err != nil {
			msg = "denied: " + err.Error()
		}
		if (ans.Reason != "" || err != nil) && v.Reason != "" {
			// Not the human's D (no terminal, too many waiting, ...):
			// say why the request needed the human at all, which the
			// "waiting for approval" notice says when one is asked.
			msg += " (it needs the user's approval: " + v.Reason + ")"
		}
		out.send(escwire.Frame{Type: escwire.FrameDenied, Message: msg})
		return nil, "", false
	}
	if ans.Argv != nil {
		// The human approved an edited command as resolved on their
		// screen; resolve it again here and refuse any difference.
		e2, err := escprompt.Resolve(ans.Argv[0], hostDir, s.cfg.Policy.Path)
		if err != nil || e2 != ans.Executable {
			out.send(escwire.Frame{Type: escwire.FrameDenied, Message: "denied: the edited command no longer resolves to what was approved"})
			return nil, "", false
		}
		argv, exe = ans.Argv, e2
		// The agent asked for something else: say what runs.
		asked := fmt.Sprintf("%q", v.Argv)
		if v.Argv == nil {
			asked = strconv.Quote(req.Command)
		}
		out.send(escwire.Frame{Type: escwire.FramePending, Message: fmt.Sprintf("the user edited the command; running %q instead of %s", argv, asked)})
	}
	if argv == nil || exe == "" {
		out.send(escwire.Frame{Type: escwire.FrameDenied, Message: "denied: not a runnable simple command"})
		return nil, "", false
	}
	return argv, exe, true
}

// promptRequest is what the human is shown about req; its hash is the
// canonical signed encoding's, which `lazaret approvals` binds an answer
// to.
func (s *Server) promptRequest(req *escwire.Request, sess *Session, v Verdict, hostDir string) escprompt.PromptRequest {
	return escprompt.PromptRequest{RequestID: req.RequestID, Profile: req.Profile, Justification: req.Justification,
		Cwd: req.Cwd, HostDir: hostDir, Command: req.Command, Argv: v.Argv, Executable: v.Executable, Reason: v.Reason,
		Path: s.cfg.Policy.Path, SessionID: sess.ID, SessionCommand: sess.Command, SessionPID: sess.PID, SessionStarted: sess.Started,
		RequestHash: escprompt.HashHex(req.Canonical())}
}

// PendingDelay is how long a prompt may take to be answered before the
// client is told that approval is awaited on the lazaret terminal. A
// session without a terminal (`lazaret exec` without -t) denies at once,
// and its agent then reads only that there is no terminal to ask on, not
// that it should wait (no human answers a prompt this fast: its keys count
// only after prompt.MinReadable).
const PendingDelay = 250 * time.Millisecond

// askAnnounced is ask, telling the client that approval is awaited once
// the session has not answered within PendingDelay.
func (s *Server) askAnnounced(ctx context.Context, sess *Session, out *frameWriter, v Verdict, pr escprompt.PromptRequest) (escprompt.Answer, error) {
	type result struct {
		ans escprompt.Answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := s.ask(ctx, sess, pr)
		done <- result{a, err}
	}()
	t := time.NewTimer(PendingDelay)
	defer t.Stop()
	select {
	case r := <-done:
		return r.ans, r.err
	case <-t.C:
	}
	out.send(escwire.Frame{Type: escwire.FramePending, Message: "waiting for approval on the lazaret terminal: " + v.Reason})
	r := <-done
	return r.ans, r.err
}

// NoTerminalDenial is the denial of a request that needs the human when
// the session has no prompter (nobody to ask); it is sent instead of the
// "waiting for approval" notice.
const NoTerminalDenial = "denied: no terminal to ask for approval (this session was started without one: " +
	"run the agent in `lazaret shell`, or `lazaret exec -t`, at a terminal)"

// ErrTooManyPrompts is the denial of a request while MaxPendingPrompt
// others wait for the human.
var ErrTooManyPrompts = errors.New("too many requests already wait for approval")

func (s *Server) ask(ctx context.Context, sess *Session, pr escprompt.PromptRequest) (escprompt.Answer, error) {
	if sess.Prompt == nil {
		return escprompt.Answer{Action: escprompt.Deny}, ErrNoPrompter
	}
	select {
	case s.prompts <- struct{}{}:
		defer func() { <-s.prompts }()
	default:
		return escprompt.Answer{Action: escprompt.Deny}, ErrTooManyPrompts
	}
	ans, err := sess.Prompt.Prompt(ctx, pr)
	if err != nil {
		return escprompt.Answer{Action: escprompt.Deny}, err
	}
	return ans, nil
}

// openDir opens the host directory matching the sandbox cwd, beneath the
// workspace (os.Root refuses any escape, symlinks included). A cwd outside
// /workspace runs at the workspace root and always asks the human.
func (s *Server) openDir(cwd string) (dir *os.File, hostDir, force string, err error) {
	root, err := os.OpenRoot(s.cfg.Workspace)
	if err != nil {
		return nil, "", "", fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	rel := "."
	clean := filepath.Clean("/" + cwd)
	switch {
	case clean == SandboxWorkspace:
	case strings.HasPrefix(clean, SandboxWorkspace+"/"):
		rel = strings.TrimPrefix(clean, SandboxWorkspace+"/")
	default:
		force = fmt.Sprintf("cwd %q is outside %s; the command would run at the workspace root", cwd, SandboxWorkspace)
	}
	f, err := root.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		// A directory the agent made (in branch mode the host tree does
		// not have it): run at the root, and only with a human's consent.
		force = fmt.Sprintf("cwd %q has no counterpart in the host workspace; the command would run at its root", cwd)
		f, err = root.Open(".")
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("cwd %q: %w", cwd, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		f.Close()
		return nil, "", "", fmt.Errorf("cwd %q: not a directory", cwd)
	}
	// Name the directory by where it really is, for the prompt and audit.
	hostDir, err = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		f.Close()
		return nil, "", "", fmt.Errorf("cwd %q: %w", cwd, err)
	}
	return f, hostDir, force, nil
}

func (s *Server) reject(ctx context.Context, req *escwire.Request, r *Rejection) {
	e := Event{Kind: EventRejected, Stage: r.Stage, Reason: r.Reason}
	if req != nil {
		e.RequestID, e.SessionID, e.Profile, e.Argv, e.Command, e.Cwd = req.RequestID, req.SessionID, req.Profile, req.Argv, req.Command, req.Cwd
	}
	s.cfg.Log.Warn("escalation rejected", "stage", r.Stage, "reason", r.Reason)
	s.audit(ctx, e)
}

func (s *Server) audit(ctx context.Context, e Event) {
	e.Time = s.cfg.Now().UTC()
	if err := s.cfg.Auditor.Audit(context.WithoutCancel(ctx), e); err != nil {
		s.cfg.Log.Error("audit", "err", err, "kind", e.Kind)
	}
}

// frameWriter serialises frames from the stdout and stderr goroutines.
type frameWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
	err error
}

func (f *frameWriter) send(fr escwire.Frame) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = f.enc.Encode(fr)
	}
	return f.err
}

type streamWriter struct {
	f    *frameWriter
	kind string
}

func (w streamWriter) Write(p []byte) (int, error) {
	if err := w.f.send(escwire.Frame{Type: w.kind, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (f *frameWriter) stream(kind string) io.Writer { return streamWriter{f, kind} }
