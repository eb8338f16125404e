package kubecli

import (
	"context"
	"io"
	"os"
	"sync"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/escprompt"
	"github.com/lazaret-dev/lazaret/internal/kube"
	"github.com/lazaret-dev/lazaret/internal/prompt"
)

// termGate lets the escalation prompt take the user's terminal over
// during a TTY session: while paused, the keys read from the terminal go
// to the prompt instead of the pod, and the pod's output waits, so it
// cannot draw over the prompt (as the local attach gate does).
type termGate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	sink   *io.PipeWriter
}

func newTermGate() *termGate {
	k := &termGate{}
	k.cond = sync.NewCond(&k.mu)
	return k
}

// pause implements prompt.Runner.Pause: keys typed before flush (which
// discards what the terminal still queues) were meant for the shell and
// are dropped.
func (k *termGate) pause(flush func() error) io.Reader {
	k.mu.Lock()
	k.paused = true
	k.sink = nil
	k.mu.Unlock()
	if flush != nil {
		_ = flush()
	}
	pr, pw := io.Pipe()
	k.mu.Lock()
	k.sink = pw
	k.mu.Unlock()
	return pr
}

// resume implements prompt.Runner.Resume.
func (k *termGate) resume() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sink != nil {
		_ = k.sink.Close()
	}
	k.paused, k.sink = false, nil
	k.cond.Broadcast()
}

// input copies the terminal (src) to the pod (dst), or to the prompt while
// paused, and closes dst at the terminal's end.
func (k *termGate) input(dst *io.PipeWriter, src io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			k.mu.Lock()
			paused, sink := k.paused, k.sink
			k.mu.Unlock()
			var werr error
			switch {
			case !paused:
				_, werr = dst.Write(buf[:n])
			case sink != nil:
				_, _ = sink.Write(buf[:n])
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.CloseWithError(err)
			return
		}
	}
}

// heldWriter is the pod's output, held while the gate is paused.
type heldWriter struct {
	k *termGate
	w io.Writer
}

func (h heldWriter) Write(p []byte) (int, error) {
	h.k.mu.Lock()
	for h.k.paused {
		h.k.cond.Wait()
	}
	h.k.mu.Unlock()
	return h.w.Write(p)
}

// sessionPrompter is the prompt on the user's terminal for a TTY
// session, nil without one (every request that is not auto-approved is
// then denied, as locally). abort ends the session (Q).
func sessionPrompter(tty *os.File, k *termGate, abort func()) *prompt.Runner {
	if tty == nil || k == nil || !isTerminal(tty) {
		return nil
	}
	return &prompt.Runner{TTY: tty, Pause: k.pause, Resume: k.resume, OnAbort: abort, Resolve: prompt.ResolveAsServer}
}

// sessionIO is a session's streams with Host Escalation around them.
type sessionIO struct {
	esc    *escSession
	runner *prompt.Runner
	stdin  io.Reader
	stdout io.Writer
	once   sync.Once
}

// startSessionIO starts Host Escalation for the session (a failure leaves
// the session without it, as locally) and assembles its streams: the
// holder's handshake, and with a terminal the prompt's gate.
func (g *globals) startSessionIO(ctx context.Context, cfg *config.Config, c *kube.Client, t *target, pod string, command []string, tty bool, abort func()) *sessionIO {
	s := &sessionIO{stdin: g.io.In, stdout: g.io.Out}
	var gate *termGate
	var ask escprompt.Prompter
	if in, _, _ := g.files(); tty && cfg.Escalation.Enabled {
		gate = newTermGate()
		if s.runner = sessionPrompter(in, gate, abort); s.runner != nil {
			ask = s.runner
		} else {
			gate = nil
		}
	}
	esc, err := g.startEscalation(ctx, cfg, c, t, pod, command, ask)
	if err != nil {
		g.log.Warn("host escalation is unavailable in this session", "err", err)
		return s
	}
	s.esc = esc
	in, out := s.stdin, s.stdout
	if gate != nil {
		pr, pw := io.Pipe()
		go gate.input(pw, in)
		in, out = pr, heldWriter{gate, out}
	}
	s.stdin, s.stdout = esc.streams(in, out)
	return s
}

// close ends the prompt (denying what waits) and Host Escalation.
func (s *sessionIO) close() {
	s.once.Do(func() {
		if s.runner != nil {
			s.runner.Close()
		}
		s.esc.close()
	})
}
