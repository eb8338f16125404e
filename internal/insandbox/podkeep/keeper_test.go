package podkeep

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	wire "github.com/lazaret-dev/lazaret/internal/wire/podkeep"
	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

// script: a line typed, then output the client is away for, then exit 7.
const script = `echo one; read x; echo got:$x; for i in 1 2 3; do echo n$i; done; exit 7`

const wantAll = "one\r\nhello\r\ngot:hello\r\nn1\r\nn2\r\nn3\r\n"

// startKeeper runs a keeper of argv in-process on a socket in a temp dir.
func startKeeper(t *testing.T, k *Keeper) (sock string, ran chan struct{}) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), sockName)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	k.Start()
	ran = make(chan struct{})
	go func() { k.Run(ln); close(ran) }()
	t.Cleanup(func() {
		k.hangUp()
		k.finish.Do(func() { close(k.done) })
		<-ran
	})
	return sock, ran
}

type result struct {
	code  int
	ended bool
	err   error
}

// linkOnce runs one Serve over a new connection to sock.
func linkOnce(t *testing.T, c *wire.Client, sock string, keys <-chan []byte, hangup <-chan struct{}) result {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close() // cutting the link
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, ended, err := c.Serve(ctx, conn, conn, keys, nil, hangup)
	return result{code, ended, err}
}

// cutter is Out for the first link: it types the line once "one" is
// shown, and breaks the link right after the line's echo, so that the
// loop's output is produced while the client is away.
type cutter struct {
	to   *bytes.Buffer
	keys chan []byte
	seen []byte
}

var errCut = errors.New("cut")

func (w *cutter) Write(p []byte) (int, error) {
	before := len(w.seen)
	w.seen = append(w.seen, p...)
	if bytes.HasPrefix(w.seen, []byte("one\r\n")) && before < 5 {
		w.keys <- []byte("hello\r")
	}
	if i := bytes.Index(w.seen, []byte("hello\r\n")); i >= 0 {
		n := i + 7 - before
		w.to.Write(p[:n])
		return n, errCut
	}
	w.to.Write(p)
	return len(p), nil
}

// relink runs the script through two links, the second from offset
// (-1: the client's own), and returns all output and the end.
func relink(t *testing.T, offset int64) (string, result, *Keeper, chan struct{}) {
	k := &Keeper{Argv: []string{"sh", "-c", script}}
	sock, ran := startKeeper(t, k)
	var all bytes.Buffer
	keys := make(chan []byte, 1)
	c := &wire.Client{Out: &cutter{to: &all, keys: keys}}
	if r := linkOnce(t, c, sock, keys, nil); r.ended || !errors.Is(r.err, errCut) {
		t.Fatalf("first link: %+v", r)
	}
	if !strings.HasSuffix(all.String(), "hello\r\n") || strings.Contains(all.String(), "n1") {
		t.Fatalf("first link showed %q", all.String())
	}
	time.Sleep(200 * time.Millisecond) // the loop runs while away
	c.Out = &all
	if offset >= 0 {
		c.Offset = uint64(offset)
	}
	r := linkOnce(t, c, sock, keys, nil)
	return all.String(), r, k, ran
}

// TestRelink: every byte exactly once and in order across a cut link,
// the exit code at the end, and the keeper gone once it was seen.
func TestRelink(t *testing.T) {
	out, r, _, ran := relink(t, -1)
	if !r.ended || r.code != 7 || r.err != nil {
		t.Fatalf("second link: %+v", r)
	}
	if out != wantAll {
		t.Fatalf("output %q, want %q", out, wantAll)
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the keeper still runs after ExitSeen")
	}
}

// TestRelinkFromZero is the control: the offset is what keeps the output
// from repeating.
func TestRelinkFromZero(t *testing.T) {
	out, r, _, _ := relink(t, 0)
	if !r.ended || r.code != 7 {
		t.Fatalf("second link: %+v", r)
	}
	if strings.Count(out, "one\r\n") != 2 {
		t.Fatalf("output %q: want the start twice", out)
	}
}

// TestLost: a ring smaller than the output away reports the loss.
func TestLost(t *testing.T) {
	k := &Keeper{Argv: []string{"sh", "-c", "i=0; while [ $i -lt 100 ]; do echo line$i; i=$((i+1)); done; exit 3"}, RingSize: 64}
	sock, _ := startKeeper(t, k)
	waitExited(t, k)
	var out bytes.Buffer
	c := &wire.Client{Out: &out}
	r := linkOnce(t, c, sock, nil, nil)
	if !r.ended || r.code != 3 {
		t.Fatalf("link: %+v", r)
	}
	k.mu.Lock()
	total := k.ring.end
	k.mu.Unlock()
	lost := total - 64
	line := "\r\nlazaret: " + strconv.FormatUint(lost, 10) + " bytes of output were lost while away\r\n"
	if !strings.HasPrefix(out.String(), line) || !strings.HasSuffix(out.String(), "line99\r\n") {
		t.Fatalf("output %q: want %q first and the last line", out.String(), line)
	}
	if c.Offset != total || len(out.String())-len(line) != 64 {
		t.Fatalf("Offset %d of %d, %d bytes shown", c.Offset, total, len(out.String())-len(line))
	}
}

func waitExited(t *testing.T, k *Keeper) {
	t.Helper()
	for i := 0; i < 500; i++ {
		k.mu.Lock()
		exited := k.exited
		k.mu.Unlock()
		if exited {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the command did not end")
}

// TestHangup: Hangup ends the command (SIGHUP); one that ignores it is
// killed KillWait later.
func TestHangup(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
	}{
		{"echo ready; sleep 100", 129},
		{"trap '' HUP; echo ready; sleep 100", 137},
	} {
		k := &Keeper{Argv: []string{"sh", "-c", tc.script}, KillWait: 300 * time.Millisecond}
		sock, _ := startKeeper(t, k)
		hangup := make(chan struct{})
		c := &wire.Client{Out: &closeOn{want: "ready", ch: hangup}}
		start := time.Now()
		r := linkOnce(t, c, sock, nil, hangup)
		if !r.ended || r.code != tc.code || time.Since(start) > 10*time.Second {
			t.Errorf("%s: %+v after %v, want exit %d", tc.script, r, time.Since(start), tc.code)
		}
	}
}

// closeOn closes ch once want was written.
type closeOn struct {
	want string
	ch   chan struct{}
	seen string
	once sync.Once
}

func (w *closeOn) Write(p []byte) (int, error) {
	w.seen += string(p)
	if strings.Contains(w.seen, w.want) {
		w.once.Do(func() { close(w.ch) })
	}
	return len(p), nil
}

// TestTakeOver: a new link closes the one before.
func TestTakeOver(t *testing.T) {
	k := &Keeper{Argv: []string{"sh", "-c", "echo ready; read x; exit 0"}}
	sock, _ := startKeeper(t, k)
	first := make(chan result, 1)
	shown := make(chan struct{})
	go func() {
		first <- linkOnce(t, &wire.Client{Out: &closeOn{want: "ready", ch: shown}}, sock, nil, nil)
	}()
	<-shown
	keys := make(chan []byte, 1)
	keys <- []byte("\r")
	r := linkOnce(t, &wire.Client{Out: io.Discard}, sock, keys, nil)
	if !r.ended || r.code != 0 {
		t.Fatalf("second link: %+v", r)
	}
	if r := <-first; r.ended || !errors.Is(r.err, io.EOF) {
		t.Fatalf("first link: %+v, want EOF", r)
	}
}

// TestHugeOffset: an offset beyond the output is the current end.
func TestHugeOffset(t *testing.T) {
	k := &Keeper{Argv: []string{"sh", "-c", "echo before; read x; echo after; exit 4"}}
	sock, _ := startKeeper(t, k)
	waitRing(t, k, "before")
	var out bytes.Buffer
	keys := make(chan []byte, 1)
	keys <- []byte("x\r")
	c := &wire.Client{Out: &out, Offset: 1 << 62}
	r := linkOnce(t, c, sock, keys, nil)
	if !r.ended || r.code != 4 || strings.Contains(out.String(), "before") || !strings.Contains(out.String(), "after") {
		t.Fatalf("%+v, output %q", r, out.String())
	}
}

func waitRing(t *testing.T, k *Keeper, want string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		k.mu.Lock()
		got := string(k.ring.read(k.ring.start(), k.RingSize))
		k.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%q never shown", want)
}

// TestBadClients: a connection without a Hello, with an oversized frame
// or garbage is closed; the keeper serves the next one.
func TestBadClients(t *testing.T) {
	k := &Keeper{Argv: []string{"sh", "-c", "read x; exit 5"}}
	sock, _ := startKeeper(t, k)
	for _, b := range [][]byte{
		{wire.FrameInput, 0, 0, 0, 1, 'x'},
		{wire.FrameHello, 0xff, 0xff, 0xff, 0xff},
		termframe.Append(nil, wire.FrameHello, []byte{1}),
		append(termframe.Append(nil, wire.FrameHello, wire.EncodeCount(0)), wire.FrameResize, 0x7f, 0xff, 0xff, 0xff),
	} {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write(b)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, conn); err != nil {
			t.Errorf("%q: not closed: %v", b, err)
		}
		conn.Close()
	}
	keys := make(chan []byte, 1)
	keys <- []byte("\r")
	if r := linkOnce(t, &wire.Client{Out: io.Discard}, sock, keys, nil); !r.ended || r.code != 5 {
		t.Fatalf("good client after bad ones: %+v", r)
	}
}

// TestCannotStart: a command that cannot start ends with 127 and says why.
func TestCannotStart(t *testing.T) {
	k := &Keeper{Argv: []string{"/nonexistent/command"}}
	sock, _ := startKeeper(t, k)
	var out bytes.Buffer
	r := linkOnce(t, &wire.Client{Out: &out}, sock, nil, nil)
	if !r.ended || r.code != 127 || !strings.Contains(out.String(), "cannot start /nonexistent/command") {
		t.Fatalf("%+v, output %q", r, out.String())
	}
}

func TestAttachNoSession(t *testing.T) {
	var stderr bytes.Buffer
	if code := Main([]string{"attach", t.TempDir()}, strings.NewReader(""), io.Discard, &stderr); code != wire.ExitNoSession {
		t.Fatalf("exit %d, want %d", code, wire.ExitNoSession)
	}
	if strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("stderr %q: want one line", stderr.String())
	}
	if code := Main([]string{"run", "x"}, nil, io.Discard, io.Discard); code != 2 {
		t.Fatalf("bad usage: exit %d", code)
	}
}
