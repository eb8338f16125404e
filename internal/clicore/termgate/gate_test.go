package termgate

import (
	"bytes"
	"io"
	"runtime"
	"sync"
	"testing"
)

// syncBuf is a goroutine-safe buffer.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestGateRoutesInputWhilePaused(t *testing.T) {
	g := NewGate()
	src, feed := io.Pipe()
	var cmd syncBuf
	done := make(chan struct{})
	go func() { g.CopyIn(&cmd, src); close(done) }()

	feed.Write([]byte("ls\r"))
	for cmd.String() != "ls\r" { // CopyIn has read it; wait until it forwarded it
		runtime.Gosched()
	}
	taker := g.Pause(nil)
	got := make(chan string)
	go func() {
		b := make([]byte, 1)
		io.ReadFull(taker, b)
		got <- string(b)
	}()
	feed.Write([]byte("a"))
	if k := <-got; k != "a" {
		t.Fatalf("taker read %q", k)
	}
	g.Resume()
	feed.Write([]byte("pwd\r"))
	feed.Close()
	<-done
	if cmd.String() != "ls\rpwd\r" {
		t.Fatalf("command got %q: a key meant for the prompt leaked (or input was lost)", cmd.String())
	}
}

func TestGateHoldsOutputWhilePaused(t *testing.T) {
	g := NewGate()
	src, feed := io.Pipe()
	var term syncBuf
	done := make(chan struct{})
	go func() { g.CopyOut(&term, src); close(done) }()
	g.Pause(nil)
	wrote := make(chan struct{})
	go func() { feed.Write([]byte("drawn over the prompt")); close(wrote) }()
	<-wrote // CopyOut has read it and is holding it
	if term.String() != "" {
		t.Fatal("output reached the terminal while paused")
	}
	g.Resume()
	feed.Close()
	<-done
	if term.String() != "drawn over the prompt" {
		t.Fatalf("held output lost: %q", term.String())
	}
}

func TestNilGateForwards(t *testing.T) {
	var g *Gate
	var out bytes.Buffer
	g.CopyIn(&out, bytes.NewReader([]byte("x")))
	g.CopyOut(&out, bytes.NewReader([]byte("y")))
	if out.String() != "xy" {
		t.Fatal(out.String())
	}
}

// TestGateDropsInputBeforeFlush: what is read between the pause and the
// end of the flush reaches neither the command nor the taker.
func TestGateDropsInputBeforeFlush(t *testing.T) {
	g := NewGate()
	g.routed = make(chan struct{}, 10)
	src, feed := io.Pipe()
	var cmd syncBuf
	done := make(chan struct{})
	go func() { g.CopyIn(&cmd, src); close(done) }()
	taker := g.Pause(func() error {
		feed.Write([]byte("y")) // typed for the shell just as the prompt came up
		<-g.routed
		return nil
	})
	got := make(chan string)
	go func() {
		b := make([]byte, 1)
		io.ReadFull(taker, b)
		got <- string(b)
	}()
	feed.Write([]byte("d"))
	if k := <-got; k != "d" {
		t.Fatalf("taker read %q, want the key typed after the flush", k)
	}
	g.Resume()
	feed.Close()
	<-done
	if cmd.String() != "" {
		t.Fatalf("command got %q", cmd.String())
	}
}
