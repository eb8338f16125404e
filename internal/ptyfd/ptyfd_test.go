package ptyfd

import (
	"io"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestCloseEndsRead: a read of a Pollable master ends when it is closed.
// Control: the master as pty.Open returns it keeps its read blocked.
func TestCloseEndsRead(t *testing.T) {
	for _, pollable := range []bool{true, false} {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Skip(err)
		}
		defer tty.Close()
		m := ptmx
		if pollable {
			if m, err = Pollable(ptmx); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan struct{})
		go func() { _, _ = io.ReadAll(m); close(done) }()
		time.Sleep(50 * time.Millisecond)
		m.Close()
		select {
		case <-done:
			if !pollable {
				t.Error("control: closing the blocking master ended its read: the test shows nothing")
			}
		case <-time.After(time.Second):
			if pollable {
				t.Fatal("closing the pollable master did not end its read")
			}
		}
	}
}
