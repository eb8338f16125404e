package kubecli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"sync"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/clicore/termgate"
	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// The escalation prompt takes the user's terminal over during a TTY
// session through the terminal gate both CLIs share (termgate.Gate, the
// local attach's): while paused, the keys read from the terminal go to
// the prompt instead of the pod, and the pod's output waits, so it cannot
// draw over the prompt; a prompt withdrawn drops the keys typed for it
// (Discard); the terminal's end ends the prompt's input (HangUp) and
// denies what was on it.

// input copies the terminal (src) to the pod (dst) through gate, and
// closes dst at the terminal's end, which hangs the gate up.
func input(gate *termgate.Gate, dst *io.PipeWriter, src io.Reader) {
	if err := gate.CopyIn(dst, src); err != nil {
		gate.HangUp()
		_ = dst.CloseWithError(err)
	}
}

// sessionPrompter is the prompt on the user's terminal for a TTY
// session, nil without one (every request that is not auto-approved is
// then denied, as locally). abort ends the session (Q).
func sessionPrompter(tty *os.File, k *termgate.Gate, abort func()) *prompt.Runner {
	if tty == nil || k == nil || !isTerminal(tty) {
		return nil
	}
	r := &prompt.Runner{TTY: tty, Pause: k.Pause, Resume: k.Resume, Discard: k.Discard, OnAbort: abort, Resolve: prompt.ResolveAsServer}
	k.OnHangUp(func() { r.DenyAll(escprompt.WithdrawHungUp) })
	return r
}

// sessionIO is a session's streams with Host Escalation around them.
type sessionIO struct {
	esc    *escSession
	runner *prompt.Runner
	stdin  io.Reader
	stdout io.Writer
	once   sync.Once
	// id is the session's id; hub its hubs and control socket (nil when
	// they could not be made).
	id  string
	hub *sessionHub
}

// startSessionIO starts the session's hubs and control socket and Host
// Escalation (a failure of either leaves the session without it, as
// locally) and assembles its streams: the holder's handshake, and with a
// terminal the prompt's gate.
func (g *globals) startSessionIO(ctx context.Context, cfg *config.Config, c *kube.Client, t *target, pod string, command []string, tty bool, abort func(), resumed *resumeRecord) *sessionIO {
	s := &sessionIO{stdin: g.io.In, stdout: g.io.Out, id: newSessionID()}
	if resumed != nil {
		s.id = resumed.Session
	}
	hub, err := g.openSessionHub(cfg, t, s.id, command, tty)
	if err != nil {
		g.log.Warn("pending approvals and events are unavailable in this session", "err", err)
	} else {
		hub.setPod(pod)
		s.hub = hub
	}
	var gate *termgate.Gate
	if in, _, _ := g.io.Files(); tty && cfg.Escalation.Enabled {
		gate = termgate.NewGate()
		if s.runner = sessionPrompter(in, gate, abort); s.runner == nil {
			gate = nil
		}
	}
	esc, err := g.startEscalation(ctx, cfg, c, t, pod, command, s.prompter(), s.id, s.hub, resumed)
	if err != nil {
		g.log.Warn("host escalation is unavailable in this session", "err", err)
		return s
	}
	s.esc = esc
	in, out := s.stdin, s.stdout
	if gate != nil {
		pr, pw := io.Pipe()
		go input(gate, pw, in)
		in, out = pr, gate.Held(out)
	}
	s.stdin, s.stdout = esc.streams(in, out)
	return s
}

// prompter is the session's escalation prompter: its terminal's prompt,
// each request registered in its approvals hub (answerable by `lazaret
// approvals answer` with answer_from = "any"); nil (every request that
// is not auto-approved denied) without a terminal, unless answer_from =
// "any" lets it wait in the hub.
func (s *sessionIO) prompter() escprompt.Prompter {
	if s.hub == nil || (s.runner == nil && !s.hub.approvals.AnswerElsewhere()) {
		if s.runner == nil {
			return nil // denied at once, as before; a proposal refused for want of a terminal
		}
		return s.runner
	}
	p := &approvals.Prompter{Hub: s.hub.approvals, Session: s.hub.session, Timeout: s.hub.timeout}
	if s.runner != nil {
		p.Terminal = s.runner
	}
	return p
}

// newSessionID is a session's id: 32 lowercase hex characters.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sessionID is the session's id (its Session Anchor's, its control
// socket's, the keeper's).
func (s *sessionIO) sessionID() string { return s.id }

// keptState is a kept session's keeper reporting its terminal: while
// detached, a prompt is taken down and waits (prompt.Runner.SetAttached);
// the hub publishes the change.
func (s *sessionIO) keptState(st clicore.KeptState) {
	if s.runner != nil && !st.Attention {
		s.runner.SetAttached(st.Attached)
	}
	if s.hub != nil {
		s.hub.keptState(st)
	}
}

// close ends the prompt (denying what waits) and Host Escalation.
func (s *sessionIO) close() { s.end(true) }

// leave is close for a session left running in its pod: the relay there
// stays, holding what the agent asks until a new lazaret-kube links.
func (s *sessionIO) leave() { s.end(false) }

func (s *sessionIO) end(relay bool) {
	s.once.Do(func() {
		if s.runner != nil {
			s.runner.Close()
		}
		s.esc.close(relay)
		s.hub.close()
	})
}
