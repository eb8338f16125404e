package sessionlink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

func TestOneLineIsInert(t *testing.T) {
	raw := "lazaret: x\x1b[2J\r\n\u202e\x9b" + strings.Repeat("y", 1000)
	got := oneLine(raw)
	if strings.ContainsAny(got, "\x1b\r\n\u202e\u009b") || strings.Contains(got, "\x9b") || len([]rune(got)) > maxNoticeLen+1 {
		t.Fatalf("not inert: %q", got)
	}
	if ok := `lazaret: network: denied DNS lookup of "a\x1b.example"`; oneLine(ok) != ok {
		t.Fatalf("an escaped line was changed: %q", oneLine(ok))
	}
}

func TestNetPromptTextEscapesAndShowsForms(t *testing.T) {
	text := strings.Join(NetPromptText(ctl.NetPrompt{Name: "xn--pple-43d.com\x1b]0;x\x07", Unicode: "аpple.com\u202e",
		Registrable: "xn--pple-43d.com", Profile: "default", WaitSeconds: 25}), "\n")
	if strings.ContainsAny(text, "\x1b\x07\u202e") {
		t.Fatalf("raw control characters: %q", text)
	}
	for _, want := range []string{"displayed as:", "registrable domain: xn--pple-43d.com", "[O] allow once", "[A] always", "[D] deny", "[I] ignore"} {
		if !strings.Contains(text, want) {
			t.Errorf("prompt lacks %q:\n%s", want, text)
		}
	}
}

// TestNetPromptNeverSharesTheTerminal: while the escalation runner has the
// terminal, a network prompt is not shown (nobody was asked), and the
// reverse waits.
func TestNetPromptNeverSharesTheTerminal(t *testing.T) {
	o := newTermOwner()
	pause := o.escalationPause(nil)
	resume := o.escalationResume(nil)
	pause(func() error { return nil })
	if o.tryNetwork() {
		t.Fatal("network prompt during an escalation prompt")
	}
	resume()
	if !o.tryNetwork() {
		t.Fatal("network prompt refused with a free terminal")
	}
	done := make(chan struct{})
	go func() { pause(func() error { return nil }); close(done) }()
	select {
	case <-done:
		t.Fatal("escalation prompt took the terminal from a network prompt")
	default:
	}
	o.releaseNetwork()
	<-done
	// Without a terminal the answer is "none".
	l := &Link{term: newTermOwner()}
	if a := l.netPrompt(context.Background(), ctl.NetPrompt{Name: "a.example"}); a.Choice != ctl.NetNone {
		t.Fatalf("without a terminal: %v", a.Choice)
	}
}

// TestNetPromptTypeAhead is issue 33's second case: the "i" of an "exit"
// and the allow keys o and a, typed 50-200 ms apart from the moment the
// prompt is on the screen, do not answer it; the notice is shown; an
// answer once it is readable counts. Control: with no delay the same
// type-ahead answers (the "i" ignores the name).
func TestNetPromptTypeAhead(t *testing.T) {
	for _, gate := range []bool{true, false} {
		tm := ptytest.Open(t)
		l := &Link{term: newTermOwner(), opts: Options{TTY: tm.TTY}}
		if !gate {
			l.readDelay, l.readDelaySet = 0, true
		}
		got := make(chan ctl.NetAnswer, 1)
		go func() {
			got <- l.netPrompt(context.Background(), ctl.NetPrompt{Name: "evil.example", Profile: "default", WaitSeconds: 25})
		}()
		tm.WaitFor(t, "ignore for this run")
		start := time.Now()
		for i, k := range "exit oa" {
			time.Sleep([]time.Duration{50, 200, 60, 90, 150}[i%5] * time.Millisecond)
			if time.Since(start) > prompt.MinReadable-150*time.Millisecond {
				break
			}
			tm.Ptmx.Write([]byte(string(k)))
		}
		var a *ctl.NetAnswer
		select {
		case ans := <-got:
			a = &ans
		case <-time.After(100 * time.Millisecond):
		}
		if !gate {
			if a == nil || a.Choice != ctl.NetIgnore {
				t.Fatalf("control: the type-ahead did not answer without the gate: %+v", a)
			}
			continue
		}
		if a != nil {
			t.Fatalf("type-ahead answered the network prompt: %+v", a)
		}
		tm.WaitFor(t, prompt.IgnoredNotice)
		time.Sleep(prompt.MinReadable)
		tm.Ptmx.Write([]byte("d"))
		select {
		case ans := <-got:
			if ans.Choice != ctl.NetDeny {
				t.Fatalf("answer after the delay: %v", ans.Choice)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer after the delay")
		}
	}
}
