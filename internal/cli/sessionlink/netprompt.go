package sessionlink

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// The network prompt: when the agent's lookup of a name outside the
// allowlist waits (netd holds it), the coordinator asks this session's
// human. Like the escalation prompt it takes the terminal over through the
// attach gate (forwarding paused, pending input flushed first), so nothing
// the agent prints or typed ahead answers it. It is a single-key prompt
// and never shares the terminal with an escalation prompt: whichever comes
// second waits (escalation) or is not shown (network: the lookup then
// fails and the user gets the notice).

// termOwner arbitrates the terminal between the two prompts.
type termOwner struct {
	mu         sync.Mutex
	cond       *sync.Cond
	escalation bool // the escalation runner has the terminal
	network    bool // a network prompt has it
}

func newTermOwner() *termOwner {
	t := &termOwner{}
	t.cond = sync.NewCond(&t.mu)
	return t
}

// escalationPause wraps the runner's Pause: it waits for a network prompt
// to end. (The runner may pause again before resuming; that is fine.)
func (t *termOwner) escalationPause(pause func(func() error) io.Reader) func(func() error) io.Reader {
	return func(flush func() error) io.Reader {
		t.mu.Lock()
		for t.network {
			t.cond.Wait()
		}
		t.escalation = true
		t.mu.Unlock()
		if pause == nil {
			_ = flush()
			return nil
		}
		return pause(flush)
	}
}

func (t *termOwner) escalationResume(resume func()) func() {
	return func() {
		if resume != nil {
			resume()
		}
		t.mu.Lock()
		t.escalation = false
		t.cond.Broadcast()
		t.mu.Unlock()
	}
}

func (t *termOwner) tryNetwork() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.escalation || t.network {
		return false
	}
	t.network = true
	return true
}

func (t *termOwner) releaseNetwork() {
	t.mu.Lock()
	t.network = false
	t.cond.Broadcast()
	t.mu.Unlock()
}

// netKeys maps the prompt's keys to answers.
var netKeys = map[byte]string{'o': ctl.NetOnce, 'a': ctl.NetAlways, 'd': ctl.NetDeny, 'i': ctl.NetIgnore}

// NetAskedBy names who asked, on a DNS prompt: no session, the sandbox.
const NetAskedBy = "a lookup from this sandbox"

// NetPromptText is what the prompt shows, one element per line. Every
// field that came from the sandbox is escaped (prompt.Visible).
func NetPromptText(p ctl.NetPrompt) []string {
	name := prompt.Visible(p.Name)
	lines := []string{
		"",
		"lazaret: the agent's DNS lookup of a name outside the allowlist is waiting (profile " + prompt.Visible(p.Profile) + ")",
		"  name:              " + name,
		// A lookup carries no session: netd sees a query from the
		// sandbox, not which shell's process sent it.
		"  asked by:          " + NetAskedBy,
	}
	if p.Unicode != "" {
		lines = append(lines, "  displayed as:      "+prompt.Visible(p.Unicode)+"   (an internationalised name: check for look-alike letters)")
	}
	if p.Registrable != "" {
		lines = append(lines, "  registrable domain: "+prompt.Visible(p.Registrable)+"   (its owner controls every name under it)")
	}
	return append(lines,
		fmt.Sprintf("  [O] allow once (this sandbox run)  [A] always (allow now, show the config line)  [D] deny  [I] ignore for this run   (the lookup waits %ds)", p.WaitSeconds),
	)
}

// netPrompt shows p and returns the choice; NetNone without a terminal,
// while an escalation prompt is open, or when ctx ends first (the lookup
// stopped waiting: the prompt is withdrawn, says so, and the keys typed
// in the next MinReadable are dropped, not forwarded to the shell).
func (l *Link) netPrompt(ctx context.Context, p ctl.NetPrompt) ctl.NetAnswer {
	none := ctl.NetAnswer{Choice: ctl.NetNone}
	tty := l.opts.TTY
	if tty == nil || !term.IsTerminal(int(tty.Fd())) || !l.term.tryNetwork() {
		return none
	}
	defer l.term.releaseNetwork()
	var in io.Reader = tty
	flush := func() error { return prompt.FlushInput(tty) }
	if l.opts.Pause != nil {
		if gated := l.opts.Pause(flush); gated != nil {
			in = gated
		}
	} else {
		_ = flush()
	}
	resumed := false
	resume := func() {
		if !resumed && l.opts.Resume != nil {
			resumed = true
			l.opts.Resume()
		}
	}
	defer resume()
	// The readability gate (prompt.ReadGate): a key counts only once the
	// prompt has been on the screen for prompt.MinReadable; the "i" of an
	// "exit" typed for the shell must not answer it.
	gate := prompt.NewReadGate(l.netReadDelay(), nil)
	notice := prompt.NewNotice(tty, "")
	defer notice.Close()
	in = prompt.GateInput(in, gate, notice.Dropped)
	writeLines(tty, NetPromptText(p))
	gate.Drawn()
	choice, ended := readChoice(ctx, in, gate, notice.Dropped)
	switch {
	case ended:
		// The terminal went away under the prompt (a hang-up).
		return ctl.NetAnswer{Choice: ctl.NetNone, Withdrawn: escprompt.WithdrawHungUp}
	case choice == "":
		// Withdrawn: say so, then drop what is typed for it a while
		// longer, before the shell gets the terminal back.
		reason := escprompt.WithdrawReason(ctx)
		notice.Close()
		writeLines(tty, []string{"lazaret: " + escprompt.WithdrawnLine(reason) + "; the lookup is denied", ""})
		if l.opts.Discard != nil {
			l.opts.Discard(l.discardFor())
		}
		return ctl.NetAnswer{Choice: ctl.NetNone, Withdrawn: reason}
	}
	msg := map[string]string{ctl.NetOnce: "allowed for this sandbox run", ctl.NetAlways: "allowed for this sandbox run",
		ctl.NetDeny: "denied", ctl.NetIgnore: "denied; no more notices of it in this run"}[choice]
	out := []string{"lazaret: " + prompt.Visible(p.Name) + ": " + msg}
	if choice == ctl.NetAlways {
		// The config file is the user's: lazaret does not rewrite it
		// (formatting, comments); it shows the line to add.
		out = append(out, "lazaret: to allow it in every run, add it to your config: "+prompt.Visible(p.ConfigLine))
	}
	writeLines(tty, append(out, ""))
	return ctl.NetAnswer{Choice: choice}
}

// readChoice reads keys until one of netKeys that the gate admits; ""
// when ctx ends first, ended when input ended (the terminal hung up). in
// drops the keys that arrived before the gate opened; gate is asked again
// as each key is handled. A read still pending when ctx ends returns once
// the caller resumes forwarding (the gate's reader then ends); what it
// returns is dropped.
func readChoice(ctx context.Context, in io.Reader, gate *prompt.ReadGate, dropped func()) (choice string, ended bool) {
	type key struct {
		c     string
		ended bool
	}
	got := make(chan key, 1)
	go func() {
		b := make([]byte, 1)
		for {
			if _, err := in.Read(b); err != nil {
				got <- key{ended: true}
				return
			}
			if !gate.Admit() {
				dropped()
				continue
			}
			if c, ok := netKeys[b[0]|0x20]; ok {
				got <- key{c: c}
				return
			}
		}
	}()
	select {
	case k := <-got:
		if k.ended && ctx.Err() != nil {
			return "", false
		}
		return k.c, k.ended
	case <-ctx.Done():
		return "", false
	}
}

// discardFor is how long keys are dropped after a withdrawal: the
// readability delay of the prompt.
func (l *Link) discardFor() time.Duration {
	if l.readDelaySet {
		return l.readDelay
	}
	return prompt.MinReadable
}

// netReadDelay is the network prompt's readability delay (tests may set
// Link.readDelay; -1 is prompt.MinReadable).
func (l *Link) netReadDelay() time.Duration {
	if l.readDelaySet {
		return l.readDelay
	}
	return -1
}

// writeLines writes lines for a terminal that may be in raw mode.
func writeLines(w *os.File, lines []string) {
	_, _ = io.WriteString(w, strings.Join(lines, "\r\n")+"\r\n")
}

// netPromptLimit bounds how long the prompt holds the terminal.
const netPromptLimit = time.Minute

// installNet registers the network notice and prompt handlers.
func (l *Link) installNet(c *ctl.Client) {
	c.Handle(ctl.TypeNetNotice, func(_ context.Context, req *ctl.Request) (any, error) {
		var n ctl.NetNotice
		if err := req.Decode(&n); err != nil {
			return nil, err
		}
		if l.opts.Notice != nil {
			l.opts.Notice(oneLine(n.Line))
		}
		return nil, nil
	})
	c.Handle(ctl.TypeNetPrompt, func(ctx context.Context, req *ctl.Request) (any, error) {
		var p ctl.NetPrompt
		if err := req.Decode(&p); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, netPromptLimit)
		defer cancel()
		ctx, withdraw := context.WithCancelCause(ctx)
		defer withdraw(nil)
		if !l.addNet(p.ID, withdraw) {
			return &ctl.NetAnswer{Choice: ctl.NetNone}, nil
		}
		defer l.removeNet(p.ID)
		a := l.netPrompt(ctx, p)
		return &a, nil
	})
}

// addNet records the network prompt id as being asked; false when the
// terminal hung up already or is detached.
func (l *Link) addNet(id string, cancel context.CancelCauseFunc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hungUp || l.detached {
		return false
	}
	if id != "" {
		if l.nets == nil {
			l.nets = map[string]context.CancelCauseFunc{}
		}
		l.nets[id] = cancel
	}
	return true
}

func (l *Link) removeNet(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.nets, id)
}

// withdrawNet withdraws the network prompt id; false when no network
// prompt of that id is being asked.
func (l *Link) withdrawNet(id, reason string) bool {
	l.mu.Lock()
	cancel, ok := l.nets[id]
	delete(l.nets, id)
	l.mu.Unlock()
	if ok {
		cancel(&escprompt.Withdrawn{Reason: reason})
	}
	return ok
}

// maxNoticeLen bounds a notice line (the coordinator's are far shorter).
const maxNoticeLen = 400

// oneLine makes sure a notice is one inert line, whatever the coordinator
// sent (it escapes the sandbox's text already; escaping again would double
// its backslashes): every control, bidi or invisible character becomes
// "?", and the line is cut at maxNoticeLen characters.
func oneLine(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxNoticeLen {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError || visible.Hidden(r) {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
