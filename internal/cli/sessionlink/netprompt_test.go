package sessionlink

import (
	"context"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/ctl"
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
