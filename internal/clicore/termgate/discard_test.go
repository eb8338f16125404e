package termgate

import (
	"io"
	"sync"
	"testing"
	"time"
)

// TestGateDiscardDropsKeysAfterWithdrawal: keys read in the window
// Discard opens (a prompt was withdrawn) are dropped, not forwarded;
// keys after it reach the command. Control: without Discard the same
// keys are forwarded.
func TestGateDiscardDropsKeysAfterWithdrawal(t *testing.T) {
	for _, discard := range []bool{true, false} {
		var mu sync.Mutex
		now := time.Unix(1000, 0)
		g := NewGate()
		g.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		g.routed = make(chan struct{})
		src, feed := io.Pipe()
		var cmd syncBuf
		done := make(chan struct{})
		go func() { g.CopyIn(&cmd, src); close(done) }()
		g.Pause(nil)
		if discard {
			g.Discard(time.Second)
		}
		g.Resume()
		feed.Write([]byte("Decho"))
		<-g.routed
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		feed.Write([]byte("ls\r"))
		<-g.routed
		feed.Close()
		<-done
		want := "ls\r"
		if !discard {
			want = "Dechols\r"
		}
		if cmd.String() != want {
			t.Fatalf("discard %v: command got %q, want %q", discard, cmd.String(), want)
		}
	}
}

// TestGateOnHangUp: the hooks run once the terminal hung up, and a hook
// registered after it runs at once.
func TestGateOnHangUp(t *testing.T) {
	g := NewGate()
	ran := make(chan string, 2)
	g.OnHangUp(func() { ran <- "before" })
	g.HangUp()
	g.HangUp()
	if got := <-ran; got != "before" {
		t.Fatal(got)
	}
	g.OnHangUp(func() { ran <- "after" })
	if got := <-ran; got != "after" {
		t.Fatal(got)
	}
	select {
	case got := <-ran:
		t.Fatalf("a hook ran twice: %s", got)
	case <-time.After(50 * time.Millisecond):
	}
	var nilGate *Gate
	nilGate.OnHangUp(func() { t.Error("ran on a nil gate") })
}
