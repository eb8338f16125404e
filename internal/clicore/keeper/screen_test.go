package keeper

import (
	"bytes"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

// TestRedrawShowsLastScreen: what an attaching terminal is sent first
// holds the screen's text, the alternate screen when the session is in
// it, and the cursor where the session's is.
func TestRedrawShowsLastScreen(t *testing.T) {
	s := newScreen(Size{Rows: 10, Cols: 40}, nil)
	s.write([]byte("$ echo MARK$((6*7))\r\nMARK42\r\n$ "))
	r := string(s.redraw())
	if !strings.Contains(r, "MARK42") || !strings.Contains(r, "\x1b[?1049l") || !strings.HasSuffix(r, "\x1b[3;3H\x1b[?25h") {
		t.Fatalf("redraw %q", r)
	}
	s.write([]byte("\x1b[?1049h\x1b[HFULLSCREEN\x1b[?25l"))
	r = string(s.redraw())
	if !strings.Contains(r, "FULLSCREEN") || strings.Contains(r, "MARK42") || !strings.HasPrefix(r, "\x1b[?1049h") || !strings.HasSuffix(r, "\x1b[?25l") {
		t.Fatalf("alternate screen redraw %q", r)
	}
}

// TestDeviceQueryDoesNotBlock: an agent asking the terminal for the
// cursor position (ESC[6n) does not stop the keeper's copy of the
// screen, nor anything written after it.
func TestDeviceQueryDoesNotBlock(t *testing.T) {
	s := newScreen(Size{Rows: 10, Cols: 40}, nil)
	for range 100 {
		s.write([]byte("\x1b[6n\x1b[c"))
	}
	s.write([]byte("after"))
	if !strings.Contains(s.text(), "after") {
		t.Fatalf("screen %q", s.text())
	}
}

// TestDeviceQueryControl: the emulator alone, undrained, holds its answer
// on a pipe nobody reads: the write that asked waits until the answer is
// read (here by the test, so that it returns), which is what would stop
// a keeper without the drain for good.
func TestDeviceQueryControl(t *testing.T) {
	emu := vt.NewEmulator(40, 10)
	wrote := make(chan struct{})
	go func() {
		_, _ = emu.Write([]byte("\x1b[6n"))
		close(wrote)
	}()
	buf := make([]byte, 32)
	n, err := emu.Read(buf) // the writer is blocked on this answer
	if err != nil || !strings.HasSuffix(string(buf[:n]), "R") {
		t.Fatalf("answer %q, %v", buf[:n], err)
	}
	<-wrote
}

// TestChattyDetachedSessionBounded: 8 MB of output (over 2000 screens) into a detached
// session's screen leaves the keeper's heap where it was (one screen, one
// line of scrollback), and a terminal that reads nothing is dropped
// once its queue is full and stalled (stallLimit) instead of holding the
// output for good.
func TestChattyDetachedSessionBounded(t *testing.T) {
	s := newScreen(Size{Rows: 50, Cols: 200}, nil)
	var line bytes.Buffer
	chunk := func(i int) []byte {
		line.Reset()
		for line.Len() < readChunk-100 {
			fmt.Fprintf(&line, "\x1b[3%dmline %d of a chatty agent, %s\x1b[0m\r\n", i%8, i, strings.Repeat("x", i%150))
			i++
		}
		return line.Bytes()
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	s.write(chunk(0))
	before := heap()
	total := 0
	for i := 0; total < 8<<20; i++ {
		b := chunk(i * 7)
		s.write(b)
		total += len(b)
	}
	after := heap()
	if after > before+8<<20 {
		t.Fatalf("heap grew from %d to %d bytes after %d bytes of output", before, after, total)
	}
	s.sync()
	s.emuMu.Lock()
	n := s.emu.ScrollbackLen()
	s.emuMu.Unlock()
	if n > scrollbackLines {
		t.Fatalf("scrollback of %d lines", n)
	}

	defer func(d time.Duration) { stallLimit = d }(stallLimit)
	stallLimit = 50 * time.Millisecond
	a, b := net.Pipe() // b is never read: the slowest terminal
	defer a.Close()
	defer b.Close()
	p := newPeer(a)
	for i := 0; i < 4*queueFrames && !p.wasDropped(); i++ {
		p.send(FrameOutput, make([]byte, readChunk))
	}
	if !p.wasDropped() {
		t.Fatal("a terminal that reads nothing is still queued for")
	}
	if len(p.out) > queueFrames {
		t.Fatalf("%d frames queued", len(p.out))
	}
}

// TestCheckPeer: only the keeper's own user may attach; the control is
// the same credentials with the keeper's uid.
func TestCheckPeer(t *testing.T) {
	if err := checkPeer(&unix.Ucred{Pid: 1, Uid: 1000, Gid: 1000}, 1000); err != nil {
		t.Fatalf("the same uid refused: %v", err)
	}
	if err := checkPeer(&unix.Ucred{Pid: 1, Uid: 1001, Gid: 1000}, 1000); err == nil || !strings.Contains(err.Error(), "uid 1001 refused") {
		t.Fatalf("another uid: %v", err)
	}
	if err := checkPeer(nil, 1000); err == nil {
		t.Fatal("no credentials accepted")
	}
	// The real socket: this process's own connection passes.
	dir := t.TempDir()
	ln, err := net.Listen("unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", dir+"/s")
		if err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1))
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := allowed(c); err != nil {
		t.Fatalf("own connection refused: %v", err)
	}
}

// TestWriteNeverWaitsForTheEmulator: with the emulator held (as while it
// scrolls through a flood of text), 32 MB of output are still taken at
// once — the session's output and the attached terminal never wait for
// the copy — and what waits for the copy stays bounded; once let go, the
// copy shows the newest line. A write that waited for the emulator would
// hang here until the test times out.
func TestWriteNeverWaitsForTheEmulator(t *testing.T) {
	s := newScreen(Size{Rows: 24, Cols: 80}, nil)
	defer s.close()
	s.emuMu.Lock()
	line := []byte(strings.Repeat("x", 70) + "\r\n")
	for i := range 32 << 20 / len(line) {
		s.write(line)
		if i%4096 == 0 {
			s.mu.Lock()
			n := len(s.backlog)
			s.mu.Unlock()
			if n > maxBacklog {
				t.Fatalf("backlog of %d bytes", n)
			}
		}
	}
	s.write([]byte("NEWEST\r\n"))
	s.emuMu.Unlock()
	if txt := s.text(); !strings.Contains(txt, "NEWEST") {
		t.Fatalf("the copy lost the newest output:\n%s", txt)
	}
}

// TestScreenOrderAfterLoss: after dropped output the copy keeps the
// order of what followed, starting at a line's start.
func TestScreenOrderAfterLoss(t *testing.T) {
	s := newScreen(Size{Rows: 5, Cols: 40}, nil)
	defer s.close()
	s.emuMu.Lock()
	for range maxBacklog / 16 {
		s.write([]byte("0123456789abcd\r\n"))
	}
	s.write([]byte("one\r\ntwo\r\n"))
	s.emuMu.Unlock()
	txt := s.text()
	if !strings.Contains(txt, "one") || strings.Index(txt, "one") > strings.Index(txt, "two") {
		t.Fatalf("screen after a loss:\n%s", txt)
	}
}

// TestSlowTerminalHoldsOutput: a terminal slower than the session's
// output is not dropped: the output waits for it, as on a real terminal,
// and every frame arrives in order. The control is the terminal that
// reads nothing (TestChattyDetachedSessionBounded), which is dropped.
func TestSlowTerminalHoldsOutput(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	p := newPeer(a)
	const frames = 3 * queueFrames
	got := make(chan int, 1)
	go func() {
		n := 0
		for {
			typ, payload, err := termframe.ReadFrame(b)
			if err != nil || typ != FrameOutput || len(payload) != 8 || int(payload[0])|int(payload[1])<<8 != n {
				got <- n
				return
			}
			n++
			if n == frames {
				got <- n
				return
			}
			if n%64 == 0 {
				time.Sleep(time.Millisecond) // slower than the sender
			}
		}
	}()
	for i := range frames {
		p.send(FrameOutput, []byte{byte(i), byte(i >> 8), 0, 0, 0, 0, 0, 0})
	}
	if n := <-got; n != frames || p.wasDropped() {
		t.Fatalf("%d of %d frames in order, dropped %v", n, frames, p.wasDropped())
	}
}
