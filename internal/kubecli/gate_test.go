package kubecli

import (
	"io"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/clicore/termgate"
)

// readEnds fails t unless r's next read ends (EOF) within 2 s.
func readEnds(t *testing.T, r io.Reader, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := r.Read(make([]byte, 1)); done <- err }()
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("%s: %v, want EOF", what, err)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("%s never ends", what)
	}
}

// TestSessionGatePauseEndsOldReader: a second pause (the next prompt)
// ends the reader the first one handed out, as the local attach's gate
// does. lazaret-kube's own gate left the old pipe open, its reader
// blocked for good (drift, issue 34).
func TestSessionGatePauseEndsOldReader(t *testing.T) {
	gate := termgate.NewGate()
	first := gate.Pause(nil)
	gate.Pause(nil)
	readEnds(t, first, "the first pause's reader")
}

// TestSessionGateTerminalEndHangsUp: the terminal's end closes the pod's
// input and hangs the gate up: the prompt's reader ends and what was on
// it is denied (OnHangUp), as locally. Before, the prompt kept waiting on
// a terminal that was gone.
func TestSessionGateTerminalEndHangsUp(t *testing.T) {
	gate := termgate.NewGate()
	hung := make(chan struct{})
	gate.OnHangUp(func() { close(hung) })
	prompt := gate.Pause(nil)
	pr, pw := io.Pipe()
	term, typing := io.Pipe()
	go input(gate, pw, term)
	_ = typing.Close()
	readEnds(t, prompt, "the prompt's reader")
	readEnds(t, pr, "the pod's input")
	select {
	case <-hung:
	case <-time.After(2 * time.Second):
		t.Fatal("the hang-up was not delivered")
	}
}
