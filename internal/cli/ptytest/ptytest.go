// Package ptytest is the tests' stand-in for a user's terminal: a PTY in
// raw mode (as attach leaves it for a shell) whose output is collected.
package ptytest

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"
)

// Terminal is a 120×40 PTY: TTY is the side a program writes and reads,
// Ptmx the user's keyboard and screen.
type Terminal struct {
	Ptmx, TTY *os.File
	mu        sync.Mutex
	out       bytes.Buffer
}

// Open opens a Terminal, closed when t ends.
func Open(t *testing.T) *Terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	_ = pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120})
	if _, err := term.MakeRaw(int(tty.Fd())); err != nil {
		t.Fatal(err)
	}
	tm := &Terminal{Ptmx: ptmx, TTY: tty}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			tm.mu.Lock()
			tm.out.Write(buf[:n])
			tm.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { tty.Close(); ptmx.Close() })
	return tm
}

// Output is everything the terminal showed so far.
func (tm *Terminal) Output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()
}

// Shows reports whether the output so far contains s.
func (tm *Terminal) Shows(s string) bool { return strings.Contains(tm.Output(), s) }

// Reset forgets the output so far.
func (tm *Terminal) Reset() {
	tm.mu.Lock()
	tm.out.Reset()
	tm.mu.Unlock()
}

// WaitFor waits (up to 10 s) until the output contains s.
func (tm *Terminal) WaitFor(t *testing.T, s string) {
	t.Helper()
	for range 1000 {
		if tm.Shows(s) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("terminal never showed %q", s)
}
