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

	"github.com/lazaret-dev/lazaret/internal/ctl"
	"github.com/lazaret-dev/lazaret/internal/prompt"
	"github.com/lazaret-dev/lazaret/internal/visible"
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

// NetPromptText is what the prompt shows, one element per line. Every
// field that came from the sandbox is escaped (prompt.Visible).
func NetPromptText(p ctl.NetPrompt) []string {
	name := prompt.Visible(p.Name)
	lines := []string{
		"",
		"lazaret: the agent's DNS lookup of a name outside the allowlist is waiting (profile " + prompt.Visible(p.Profile) + ")",
		"  name:              " + name,
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
// while an escalation prompt is open, or when ctx ends first.
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
	choice := readChoice(ctx, in, gate, notice.Dropped, resume)
	if choice == "" {
		writeLines(tty, []string{"lazaret: no answer; the lookup is denied", ""})
		return none
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
// when ctx ends or input ends. in drops the keys that arrived before the
// gate opened; gate is asked again as each key is handled. unblock makes
// a pending read return (the gate's reader ends on resume).
func readChoice(ctx context.Context, in io.Reader, gate *prompt.ReadGate, dropped, unblock func()) string {
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 1)
		for {
			if _, err := in.Read(b); err != nil {
				got <- ""
				return
			}
			if !gate.Admit() {
				dropped()
				continue
			}
			if c, ok := netKeys[b[0]|0x20]; ok {
				got <- c
				return
			}
		}
	}()
	select {
	case c := <-got:
		return c
	case <-ctx.Done():
		unblock()
		return ""
	}
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
		a := l.netPrompt(ctx, p)
		return &a, nil
	})
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
