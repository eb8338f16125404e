package escclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// listen returns a UNIX listener in a temporary directory and its path.
func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln, p
}

func TestBlockingConnRoundTrip(t *testing.T) {
	ln, p := listen(t)
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b := make([]byte, 5)
		_, _ = io.ReadFull(c, b)
		got <- b
		// One write of more than one reader call's worth.
		_, _ = c.Write(bytes.Repeat([]byte("0123456789"), 100))
	}()
	c, err := dialBlocking(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != "hello" {
		t.Fatalf("server read %q", b)
	}
	// Small reads are served from one read of the socket, then EOF.
	var all []byte
	buf := make([]byte, 7)
	for {
		n, err := c.Read(buf)
		all = append(all, buf[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := bytes.Repeat([]byte("0123456789"), 100); !bytes.Equal(all, want) {
		t.Fatalf("read %d bytes, want %d", len(all), len(want))
	}
	if c.SetDeadline(time.Now()) == nil {
		t.Fatal("SetDeadline claims to work")
	}
}

// TestBlockingConnCloseWakesRead: Close (what --timeout calls) makes a
// read blocked in another goroutine return.
func TestBlockingConnCloseWakesRead(t *testing.T) {
	ln, p := listen(t)
	end := make(chan struct{})
	defer close(end)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			<-end // never answers
		}
	}()
	c, err := dialBlocking(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read returned no error after Close")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not wake the blocked read")
	}
	c.release()
	if err := c.Close(); err != nil {
		t.Fatalf("Close after release: %v", err)
	}
}

func TestDialBlockingMissing(t *testing.T) {
	_, err := dialBlocking(context.Background(), filepath.Join(t.TempDir(), "none"))
	if err == nil {
		t.Fatal("dial of a missing socket succeeded")
	}
}

// TestDialBlockingHonoursDeadline: a connect that waits for room in a full
// backlog gives up when the context's deadline passes (--timeout).
func TestDialBlockingHonoursDeadline(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	lfd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(lfd)
	if err := syscall.Bind(lfd, &syscall.SockaddrUnix{Name: p}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(lfd, 0); err != nil { // never accepts
		t.Fatal(err)
	}
	var conns []*blockingConn
	defer func() {
		for _, c := range conns {
			c.release()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	for i := 0; i < 8; i++ { // fill the backlog; one of these must wait
		c, err := dialBlocking(ctx, p)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("connect %d: %v, want the deadline", i, err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("gave up after %v", d)
			}
			return
		}
		conns = append(conns, c)
	}
	t.Fatal("8 connects to a listener with backlog 0 all succeeded")
}
