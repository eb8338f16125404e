package prompt

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// ErrNoTTY is returned (with a Deny answer) when there is no terminal to
// ask on.
var ErrNoTTY = errors.New("no terminal to ask on (run lazaret shell, or lazaret exec -t, at a terminal)")

// Runner shows prompts on the CLI's terminal. It implements
// escprompt.Prompter: each call waits for its own answer while requests
// queue in one bubbletea program.
type Runner struct {
	// TTY is the terminal; nil or not a terminal denies every request.
	TTY *os.File
	// Resolve resolves edited commands (see Resolver).
	Resolve Resolver
	// Pause stops the TTY forwarding of the attached command before a
	// prompt, calls flush (which discards pending terminal input) and
	// returns where the prompt reads keys from: the attach layer keeps
	// reading the terminal and hands its input over (nil: read the TTY
	// directly). Resume restarts forwarding. Both may be nil.
	Pause  func(flush func() error) io.Reader
	Resume func()
	// OnAbort is called once after the human pressed Q (the CLI then asks
	// the coordinator to stop).
	OnAbort func()
	// Discard, when set, drops the terminal's input for the given time
	// instead of forwarding it to the attached command (attach.Gate's
	// Discard). It is called, before Resume, when the prompt left the
	// screen because its request ended rather than by the human's key:
	// keys typed at a prompt that just vanished were meant for it, and
	// must not reach the sandbox (the readability gate, mirrored).
	Discard func(time.Duration)
	// noFlush disables the input flush (tests' positive control only).
	noFlush bool
	// readDelay, when readDelaySet, replaces MinReadable (tests only: 0
	// is the positive control of the readability gate).
	readDelay    time.Duration
	readDelaySet bool
	// noReadGate opens the gate for good (tests' positive controls only).
	noReadGate bool

	mu      sync.Mutex
	prog    *tea.Program
	pending map[string]pendingReq
	// gone remembers withdrawals of requests not (yet) pending: the
	// withdrawal may overtake its prompt (each control message is handled
	// in a goroutine of its own). goneOrder bounds it.
	gone      map[string]string
	goneOrder []string
	// hungUp: the terminal is gone; every prompt is denied with it.
	hungUp string
	// detached: no terminal is attached to the session now
	// (SetAttached): prompts wait, undrawn, until one is.
	detached bool
	running  sync.WaitGroup
}

// maxGone bounds the withdrawals remembered before their prompt arrived.
const maxGone = 64

// Wait returns once no prompt program runs (the terminal is restored).
func (r *Runner) Wait() { r.running.Wait() }

// Close denies every pending prompt and waits until the terminal is
// restored (the CLI calls it before exiting).
func (r *Runner) Close() {
	r.mu.Lock()
	ids := make([]string, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.Cancel(id)
	}
	r.Wait()
}

type pendingReq struct {
	req escprompt.PromptRequest
	ch  chan result
}

type result struct {
	ans escprompt.Answer
	err error
}

// Prompt implements escprompt.Prompter. A request withdrawn while shown
// or queued (Withdraw, or ctx ending) is denied with a *escprompt.Withdrawn
// error.
//
// Without a terminal a request is denied at once (ErrNoTTY), unless it
// may be answered elsewhere (AnswerElsewhere: `lazaret approvals`): then
// it stays pending until its withdrawal.
func (r *Runner) Prompt(ctx context.Context, req escprompt.PromptRequest) (escprompt.Answer, error) {
	if !r.hasTTY() && !req.AnswerElsewhere {
		return escprompt.Answer{Action: escprompt.Deny}, ErrNoTTY
	}
	ch := make(chan result, 1)
	r.mu.Lock()
	if r.hungUp != "" {
		reason := r.hungUp
		r.mu.Unlock()
		return escprompt.Answer{Action: escprompt.Deny, Reason: reason}, nil
	}
	if reason, ok := r.gone[req.RequestID]; ok {
		// Withdrawn before it arrived: never shown.
		delete(r.gone, req.RequestID)
		r.mu.Unlock()
		return escprompt.Answer{Action: escprompt.Deny}, &escprompt.Withdrawn{Reason: reason}
	}
	if r.pending == nil {
		r.pending = map[string]pendingReq{}
	}
	r.pending[req.RequestID] = pendingReq{req, ch}
	switch {
	case r.detached || !r.hasTTY():
		r.mu.Unlock() // shown on the next attach, or answered elsewhere
	case r.prog == nil:
		r.start([]escprompt.PromptRequest{req})
		r.mu.Unlock()
	default:
		p := r.prog
		r.mu.Unlock()
		p.Send(AddMsg{Request: req})
	}
	select {
	case res := <-ch:
		return res.ans, res.err
	case <-ctx.Done():
		reason := escprompt.WithdrawReason(ctx)
		r.Withdraw(req.RequestID, reason)
		res := <-ch
		return res.ans, res.err
	}
}

// hasTTY reports whether prompts can be drawn at all.
func (r *Runner) hasTTY() bool { return r.TTY != nil && term.IsTerminal(int(r.TTY.Fd())) }

// SetAttached is the session's terminal attaching or detaching (a kept
// session: internal/clicore/keeper). While detached no prompt is drawn:
// the one on the screen is taken down and, like every other, waits
// unanswered; on attach they are drawn again, as a new program with its
// input flushed and its readability gate closed, so keys typed within
// MinReadable of the redraw (meant for the shell the user came back to,
// or timed by the agent for the attach) are dropped.
func (r *Runner) SetAttached(attached bool) {
	r.mu.Lock()
	r.detached = !attached
	p := r.prog
	if attached && p == nil && r.hungUp == "" && r.hasTTY() && len(r.pending) > 0 {
		left := make([]escprompt.PromptRequest, 0, len(r.pending))
		for _, pr := range r.pending {
			left = append(left, pr.req)
		}
		r.start(left)
	}
	r.mu.Unlock()
	if !attached && p != nil {
		p.Send(HoldMsg{})
	}
}

// start runs a program for reqs; r.mu is held.
func (r *Runner) start(reqs []escprompt.PromptRequest) {
	// Whatever was typed for the shell before the prompt appeared must not
	// answer it.
	flush := func() error {
		if r.noFlush {
			return nil
		}
		return FlushInput(r.TTY)
	}
	var in io.Reader = r.TTY
	if r.Pause != nil {
		if gated := r.Pause(flush); gated != nil {
			in = gated
		}
	} else {
		_ = flush()
	}
	delay := time.Duration(-1)
	if r.readDelaySet {
		delay = r.readDelay
	}
	gate := NewReadGate(delay, nil)
	gate.off = r.noReadGate
	var prog atomic.Pointer[tea.Program]
	in = newGatedInput(in, gate, func() {
		if p := prog.Load(); p != nil {
			go p.Send(droppedMsg{})
		}
	}, true)
	m := New(reqs[0], r.Resolve, r.deliver)
	m.SetReadGate(gate)
	m.queue = append(m.queue, reqs[1:]...)
	p := tea.NewProgram(m, tea.WithInput(in), tea.WithOutput(frameOutput{r.TTY, gate}), tea.WithoutSignalHandler())
	prog.Store(p)
	r.prog = p
	r.running.Add(1)
	restoreOutput := cookedOutput(r.TTY)
	go func() {
		defer r.running.Done()
		final, err := p.Run()
		restoreOutput()
		r.mu.Lock()
		r.prog = nil
		var left []escprompt.PromptRequest
		for _, pr := range r.pending {
			left = append(left, pr.req)
		}
		if err != nil {
			// The terminal is unusable: deny what is waiting.
			for id, pr := range r.pending {
				pr.ch <- result{ans: escprompt.Answer{Action: escprompt.Deny}}
				delete(r.pending, id)
			}
			left = nil
		}
		hungUp := r.hungUp != ""
		if len(left) > 0 && !hungUp && !r.detached {
			// Requests that arrived while the program was quitting.
			r.start(left)
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if fm, ok := final.(*Model); ok && fm.endWithdrawn != "" && err == nil && !hungUp {
			r.withdrawn(fm.endWithdrawn)
		}
		if r.Resume != nil {
			r.Resume()
		}
	}()
}

// withdrawn says on the terminal that the prompt on it was withdrawn and
// has the keys typed in the next MinReadable dropped (Discard): they were
// typed for the prompt, which the human may not have seen go.
func (r *Runner) withdrawn(reason string) {
	_, _ = io.WriteString(r.TTY, "\r\nlazaret: "+escprompt.WithdrawnLine(reason)+"\r\n")
	if r.Discard != nil {
		r.Discard(r.discardFor())
	}
}

// discardFor is how long keys are dropped after a withdrawal: as long as
// the readability gate holds them before a prompt counts them.
func (r *Runner) discardFor() time.Duration {
	if r.readDelaySet {
		return r.readDelay
	}
	return MinReadable
}

// Cancel withdraws the prompt of id: its requester went away.
func (r *Runner) Cancel(id string) { r.Withdraw(id, escprompt.WithdrawClientGone) }

// Withdraw takes the prompt of id off the screen (or out of the queue)
// because its request ended (reason, one of escprompt's Withdraw*): its
// Prompt returns a denial with a *escprompt.Withdrawn error. When it was
// the prompt on the screen and no other follows, the terminal says so
// and the keys typed in the next MinReadable are dropped (Discard); a
// prompt that follows says so on its own screen. A withdrawal that comes
// before its prompt is remembered, and that prompt is never shown.
func (r *Runner) Withdraw(id, reason string) {
	r.mu.Lock()
	pr, ok := r.pending[id]
	delete(r.pending, id)
	if !ok {
		r.rememberGone(id, reason)
	}
	p := r.prog
	r.mu.Unlock()
	if ok {
		pr.ch <- result{ans: escprompt.Answer{Action: escprompt.Deny}, err: &escprompt.Withdrawn{Reason: reason}}
	}
	if p != nil {
		p.Send(CancelMsg{RequestID: id, Reason: reason})
	}
}

// rememberGone records a withdrawal that came before its prompt; r.mu is
// held.
func (r *Runner) rememberGone(id, reason string) {
	if r.gone == nil {
		r.gone = map[string]string{}
	}
	if _, ok := r.gone[id]; ok {
		return
	}
	if len(r.goneOrder) >= maxGone {
		delete(r.gone, r.goneOrder[0])
		r.goneOrder = r.goneOrder[1:]
	}
	r.gone[id] = reason
	r.goneOrder = append(r.goneOrder, id)
}

// DenyAll denies every prompt shown or queued, and every later one, with
// reason: the terminal they were on went away (a hang-up), so no human
// can answer them, and the requests are answered at once rather than
// left waiting for their requesters to give up.
func (r *Runner) DenyAll(reason string) {
	r.mu.Lock()
	r.hungUp = reason
	pending := r.pending
	r.pending = nil
	p := r.prog
	r.mu.Unlock()
	for id, pr := range pending {
		pr.ch <- result{ans: escprompt.Answer{Action: escprompt.Deny, Reason: reason}}
		if p != nil {
			p.Send(CancelMsg{RequestID: id})
		}
	}
}

// deliver is the model's decide callback (runs inside Update).
func (r *Runner) deliver(d Decision) {
	r.mu.Lock()
	pr, ok := r.pending[d.RequestID]
	delete(r.pending, d.RequestID)
	r.mu.Unlock()
	if ok {
		pr.ch <- result{ans: d.Answer}
	}
	if d.Answer.Action == escprompt.Abort && r.OnAbort != nil {
		go r.OnAbort()
	}
}

// frameOutput is the prompt's terminal as bubbletea writes its frames:
// the readability gate learns when the frame that shows new content was
// completely written (the delay counts from there).
type frameOutput struct {
	*os.File
	g *ReadGate
}

func (f frameOutput) Write(p []byte) (int, error) {
	e := f.g.beginWrite()
	n, err := f.File.Write(p)
	f.g.endWrite(e)
	return n, err
}

func (f frameOutput) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

// cookedOutput turns output post-processing (OPOST|ONLCR) back on for the
// prompt and returns the function that restores the terminal. The attached
// session keeps the terminal raw, and bubbletea, reading keys from the gate
// rather than from the terminal itself, renders for a terminal that maps
// "\n" to "\r\n": without ONLCR every line of the prompt would start where
// the previous one ended.
func cookedOutput(tty *os.File) func() {
	fd := int(tty.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil || old.Oflag&(unix.OPOST|unix.ONLCR) == unix.OPOST|unix.ONLCR {
		return func() {}
	}
	cooked := *old
	cooked.Oflag |= unix.OPOST | unix.ONLCR
	if unix.IoctlSetTermios(fd, unix.TCSETS, &cooked) != nil {
		return func() {}
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }
}

// FlushInput discards input pending on the terminal (tcflush TCIFLUSH).
func FlushInput(tty *os.File) error {
	return unix.IoctlSetInt(int(tty.Fd()), unix.TCFLSH, unix.TCIFLUSH)
}

// ResolveAsServer resolves an edited command's argv0 as the escalation
// server will (through the request's PATH, else this process's, made
// safe): the server resolves again and refuses a difference.
func ResolveAsServer(argv0 string, r escprompt.PromptRequest) (string, error) {
	path := r.Path
	if path == "" {
		path = escprompt.SafePath(os.Getenv("PATH"))
	}
	return escprompt.Resolve(argv0, r.HostDir, escprompt.SafePath(path))
}
