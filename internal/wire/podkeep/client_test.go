package podkeep

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

func TestArgv(t *testing.T) {
	got := strings.Join(RunArgv("/b", "/d", []string{"sh", "-c", "x"}), " ")
	if got != "/b __podkeep run /d -- sh -c x" {
		t.Fatalf("RunArgv = %q", got)
	}
	if got := strings.Join(AttachArgv("/b", "/d"), " "); got != "/b __podkeep attach /d" {
		t.Fatalf("AttachArgv = %q", got)
	}
}

func TestPayloads(t *testing.T) {
	if s, err := DecodeSize(EncodeSize(Size{40, 150})); err != nil || s != (Size{40, 150}) {
		t.Fatalf("%v %v", s, err)
	}
	for _, bad := range []Size{{0, 80}, {24, 0}, {MaxSide + 1, 80}} {
		if _, err := DecodeSize(EncodeSize(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if c, err := DecodeExit(EncodeExit(-1)); err != nil || c != -1 {
		t.Fatalf("%d %v", c, err)
	}
	if n, err := DecodeCount(EncodeCount(1 << 60)); err != nil || n != 1<<60 {
		t.Fatalf("%d %v", n, err)
	}
	if _, err := DecodeCount([]byte{1}); err == nil {
		t.Fatal("short count accepted")
	}
}

// fakePod plays the keeper on the far end of a pipe.
func fakePod(t *testing.T) (podIn io.Writer, podOut io.Reader, pod net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, a, b
}

func expect(t *testing.T, r io.Reader, typ byte) []byte {
	t.Helper()
	got, p, err := termframe.ReadFrame(r)
	if err != nil || got != typ {
		t.Fatalf("frame %q %q %v, want %q", got, p, err, typ)
	}
	return p
}

func serve(c *Client, in io.Writer, out io.Reader, keys <-chan []byte, sizes <-chan Size, hangup <-chan struct{}) chan [3]any {
	done := make(chan [3]any, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		code, ended, err := c.Serve(ctx, in, out, keys, sizes, hangup)
		done <- [3]any{code, ended, err}
	}()
	return done
}

// TestServe: Hello carries the offset, the size is sent again on the
// next link, Output and Lost advance Offset, Exit is acknowledged.
func TestServe(t *testing.T) {
	var out bytes.Buffer
	c := &Client{Out: &out, Offset: 5}
	in, podOut, pod := fakePod(t)
	keys, sizes, hangup := make(chan []byte, 1), make(chan Size, 1), make(chan struct{})
	done := serve(c, in, podOut, keys, sizes, hangup)
	if n, _ := DecodeCount(expect(t, pod, FrameHello)); n != 5 {
		t.Fatalf("Hello %d, want 5", n)
	}
	sizes <- Size{30, 100}
	if s, _ := DecodeSize(expect(t, pod, FrameResize)); s != (Size{30, 100}) {
		t.Fatalf("size %v", s)
	}
	keys <- []byte("ls\r")
	if p := expect(t, pod, FrameInput); string(p) != "ls\r" {
		t.Fatalf("keys %q", p)
	}
	_ = termframe.WriteFrame(pod, FrameOutput, []byte("abc"))
	_ = termframe.WriteFrame(pod, FrameLost, EncodeCount(10))
	_ = termframe.WriteFrame(pod, 'Z', []byte("unknown: ignored"))
	close(hangup)
	expect(t, pod, FrameHangup)
	_ = termframe.WriteFrame(pod, FrameExit, EncodeExit(129))
	expect(t, pod, FrameExitSeen)
	r := <-done
	if r[0] != 129 || r[1] != true || r[2] != nil {
		t.Fatalf("Serve = %v", r)
	}
	if want := "abc\r\nlazaret: 10 bytes of output were lost while away\r\n"; out.String() != want {
		t.Fatalf("Out = %q, want %q", out.String(), want)
	}
	if c.Offset != 18 {
		t.Fatalf("Offset = %d, want 18", c.Offset)
	}
	// The next link says the last size again, unasked.
	in2, podOut2, pod2 := fakePod(t)
	done = serve(c, in2, podOut2, nil, nil, nil)
	expect(t, pod2, FrameHello)
	if s, _ := DecodeSize(expect(t, pod2, FrameResize)); s != (Size{30, 100}) {
		t.Fatalf("size on re-link %v", s)
	}
	pod2.Close()
	if r := <-done; r[1] != false || !errors.Is(r[2].(error), io.EOF) {
		t.Fatalf("Serve after the pod closed = %v, want EOF", r)
	}
}

// TestServeLeavesKeys: once Serve returned, nothing of its link takes a
// key meant for the next.
func TestServeLeavesKeys(t *testing.T) {
	c := &Client{Out: io.Discard}
	in, podOut, pod := fakePod(t)
	keys := make(chan []byte, 1)
	done := serve(c, in, podOut, keys, nil, nil)
	expect(t, pod, FrameHello)
	pod.Close()
	<-done
	keys <- []byte("x")
	time.Sleep(50 * time.Millisecond)
	if len(keys) != 1 {
		t.Fatal("a key was taken after Serve returned")
	}
}

// TestServeMalformed: bad payloads and oversized frames end the link
// with an error, never a panic or a large allocation.
func TestServeMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"lost":     termframe.Append(nil, FrameLost, []byte{1, 2}),
		"exit":     termframe.Append(nil, FrameExit, nil),
		"oversize": {FrameOutput, 0xff, 0xff, 0xff, 0xff},
		"cut":      {FrameOutput, 0, 0, 0, 9, 'a'},
		"wraps":    termframe.Append(termframe.Append(nil, FrameLost, EncodeCount(1<<63)), FrameLost, EncodeCount(1<<63)),
	} {
		c := &Client{Out: io.Discard}
		code, ended, err := c.Serve(context.Background(), io.Discard, bytes.NewReader(b), nil, nil, nil)
		if ended || err == nil || err == io.EOF || code != 0 {
			t.Errorf("%s: Serve = %d %v %v, want an error", name, code, ended, err)
		}
	}
}

// FuzzServe: whatever the pod sends, Serve returns, and Offset counts
// exactly the output written plus the losses reported.
func FuzzServe(f *testing.F) {
	f.Add(termframe.Append(termframe.Append(nil, FrameOutput, []byte("hi")), FrameExit, EncodeExit(7)))
	f.Add(termframe.Append(nil, FrameLost, EncodeCount(1<<63)))
	f.Add([]byte{FrameOutput, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var out countWriter
		c := &Client{Out: &out}
		_, _, _ = c.Serve(context.Background(), io.Discard, bytes.NewReader(data), nil, nil, nil)
		if c.Offset < uint64(out.output) {
			t.Fatalf("Offset %d below the %d bytes written", c.Offset, out.output)
		}
	})
}

// countWriter counts output bytes, not the lost lines.
type countWriter struct{ output int }

func (w *countWriter) Write(p []byte) (int, error) {
	if !bytes.HasPrefix(p, []byte("\r\nlazaret: ")) {
		w.output += len(p)
	}
	return len(p), nil
}
