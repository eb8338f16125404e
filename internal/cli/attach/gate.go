package attach

import "github.com/lazaret-dev/lazaret/internal/clicore/termgate"

// Gate is the terminal gate both CLIs share (internal/clicore/termgate):
// the escalation prompt takes the terminal over through it.
type Gate = termgate.Gate

// NewGate returns an open gate.
func NewGate() *Gate { return termgate.NewGate() }
