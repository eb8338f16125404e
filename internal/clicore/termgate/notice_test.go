package termgate

import (
	"bytes"
	"io"
	"testing"
)

// TestNoticeStartsOnAFreshLine: a notice after output that stopped
// mid-line starts on a new line (so it is not glued to the agent's text),
// and after a full line it does not add an empty one.
func TestNoticeStartsOnAFreshLine(t *testing.T) {
	g := NewGate()
	var out bytes.Buffer
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() { g.CopyOut(&out, pr); close(done) }()
	pw.Write([]byte("$ partial"))
	pw.Close()
	<-done
	g.Notice(&out, "lazaret: one")
	g.Notice(&out, "lazaret: two")
	if got := out.String(); got != "$ partial\r\nlazaret: one\r\nlazaret: two\r\n" {
		t.Fatalf("%q", got)
	}
	var plain bytes.Buffer
	(*Gate)(nil).Notice(&plain, "lazaret: x")
	if plain.String() != "lazaret: x\n" {
		t.Fatalf("plain: %q", plain.String())
	}
}
