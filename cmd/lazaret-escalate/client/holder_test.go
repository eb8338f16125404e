package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/session"
)

func TestParsePPid(t *testing.T) {
	for stat, want := range map[string]int{
		"12 (sh) S 7 12 12 0 -1":            7,
		"12 (a) b) c) R 1 12 12 0":          1,
		"99 (lazaret-escalate) S 0 99 99 0": 0,
	} {
		if got, err := ParsePPid([]byte(stat)); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", stat, got, err, want)
		}
	}
	for _, bad := range []string{"", "12 sh S 7", "12 (sh) S", "12 (sh) S x", "12 (sh) S -3"} {
		if _, err := ParsePPid([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParsePPid(f *testing.F) {
	f.Add([]byte("12 (sh) S 7 12 12 0 -1 4194560"))
	f.Add([]byte("1 ()) ) R 0"))
	f.Fuzz(func(t *testing.T, stat []byte) {
		if n, err := ParsePPid(stat); err == nil && n < 0 {
			t.Fatalf("negative parent %d", n)
		}
	})
}

func TestDescends(t *testing.T) {
	tree := map[int]int{10: 5, 5: 3, 3: 1, 20: 1, 30: 30}
	ppid := func(p int) (int, error) {
		if q, ok := tree[p]; ok {
			return q, nil
		}
		return 0, errors.New("no such process")
	}
	for _, c := range []struct {
		pid, anc int
		want     bool
	}{{10, 5, true}, {10, 3, true}, {5, 3, true}, {3, 3, false}, {20, 3, false}, {99, 3, false}, {30, 3, false}} {
		if got := Descends(c.pid, c.anc, ppid); got != c.want {
			t.Errorf("Descends(%d, %d) = %v", c.pid, c.anc, got)
		}
	}
	// The real /proc: this process descends from its parent, not the
	// other way round.
	if !Descends(os.Getpid(), os.Getppid(), readPPid) || Descends(os.Getppid(), os.Getpid(), readPPid) {
		t.Error("real process tree misread")
	}
}

// The holder's peer check, through real sockets: a child of this process
// is accepted, a process that is not a descendant is refused before its
// request is read (no acknowledgement).
func TestSessionPeer(t *testing.T) {
	ln, p := listen(t)
	ran := make(chan struct{}, 4)
	b := &Broker{Peer: sessionPeer(os.Getpid()), Run: func(context.Context, []string, func(string) string, io.Writer, io.Writer) int {
		ran <- struct{}{}
		return 7
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = b.Serve(ctx, ln) }()
	// This process itself is not its own descendant: refused.
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := EncodeBrokerRequest(&BrokerRequest{Cwd: "/", Args: []string{"x"}}, nil)
	_, _ = c.Write(req)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Closed unacknowledged: EOF, or a reset when the request was unread.
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("non-descendant: read %d, %v; want the connection closed", n, err)
	}
	c.Close()
	// A child process connects (the test binary itself, in helper mode
	// only: LZ_HELPER_SOCK set).
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperConnect$")
	cmd.Env = append(os.Environ(), "LZ_HELPER_SOCK="+p)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "code 7") {
		t.Fatalf("descendant: %v\n%s", err, out)
	}
	select {
	case <-ran:
	default:
		t.Fatal("the descendant's request did not run")
	}
}

// TestHelperConnect is the child of TestSessionPeer.
func TestHelperConnect(t *testing.T) {
	p := os.Getenv("LZ_HELPER_SOCK")
	if p == "" {
		t.Skip("helper")
	}
	var so, se bytes.Buffer
	code, err := viaHolder(context.Background(), p, func(string) string { return "" }, request{args: []string{"lazaret-escalate", "--", "echo"}}, &so, &se)
	fmt.Printf("code %d %v\n", code, err)
}

// viaHolder reports a refusal as such.
func TestViaHolderRefused(t *testing.T) {
	ln, p := listen(t)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
	}()
	_, err := viaHolder(context.Background(), p, func(string) string { return "" }, request{args: []string{"x"}}, io.Discard, io.Discard)
	if !errors.Is(err, errRefused) {
		t.Fatalf("err %v", err)
	}
	if _, err := viaHolder(context.Background(), filepath.Join(t.TempDir(), "none"), func(string) string { return "" }, request{args: []string{"x"}}, io.Discard, io.Discard); err == nil {
		t.Fatal("no holder: no error")
	}
}

// ScrubEnv overwrites the value in the block /proc/self/environ shows
// (checked in a child process that has the variable from its start).
func TestScrubEnv(t *testing.T) {
	if mode := os.Getenv("LZ_SCRUB_CHILD"); mode != "" {
		if mode == "scrub" {
			if err := ScrubEnv("LZ_SCRUB_SECRET"); err != nil {
				fmt.Println(err)
			}
		}
		b, _ := os.ReadFile("/proc/self/environ")
		fmt.Printf("has-secret=%v\n", bytes.Contains(b, []byte("hunter2hunter2")))
		return
	}
	// Control ("keep"): without the scrub, /proc/self/environ shows it.
	for mode, want := range map[string]string{"keep": "has-secret=true", "scrub": "has-secret=false"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestScrubEnv$")
		cmd.Env = append(os.Environ(), "LZ_SCRUB_SECRET=hunter2hunter2", "LZ_SCRUB_CHILD="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
	}
}

// The holder's key signs even though the forwarded variables name
// another session: run takes the key from the context.
func TestBrokerUsesHolderKey(t *testing.T) {
	a, _ := session.New()
	del, err := a.Delegate("0123456789ab", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{Delegated: del}
	var got *session.Delegated
	b.Run = func(ctx context.Context, _ []string, _ func(string) string, _, _ io.Writer) int {
		got, _ = ctx.Value(delegatedKey{}).(*session.Delegated)
		return 0
	}
	ln, p := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = b.Serve(ctx, ln) }()
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := EncodeBrokerRequest(&BrokerRequest{Cwd: "/", Args: []string{"x"}}, []string{"LAZARET_SESSION_ID=" + strings.Repeat("a", 32)})
	_, _ = c.Write(req)
	if _, _, _, code := readFrames(t, c); code != 0 || got != del {
		t.Fatalf("code %d, key %v", code, got)
	}
}

// SessionMain end to end in a child process (the test binary in helper
// mode): the command runs without the key and with the socket, its exit
// code and a signal's 128+N come back, and its own processes get answers
// from the holder.
func TestSessionMain(t *testing.T) {
	if os.Getenv("LZ_HOLDER_CHILD") == "1" {
		os.Exit(SessionMain(strings.Split(os.Getenv("LZ_HOLDER_ARGS"), "\x1f"), os.Stderr))
	}
	a, _ := session.New()
	del, err := a.Delegate("0123456789ab", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	run := func(script string) (string, int) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSessionMain$")
		cmd.Env = append(append(os.Environ(), del.Env()...), "LZ_HOLDER_CHILD=1", "LZ_HOLDER_ARGS=--\x1fsh\x1f-c\x1f"+script)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run(`env | grep ^LAZARET_; exit 7`)
	if code != 7 || strings.Contains(out, session.EnvDelegatedKey) || strings.Contains(out, session.EnvDelegation) || !strings.Contains(out, EnvSessionSocket+"=") {
		t.Fatalf("exit %d, environment:\n%s", code, out)
	}
	if _, code := run(`kill $$`); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("killed command: exit %d", code)
	}
	// A process of the session is served by the holder: acknowledged,
	// then the request fails here for want of TLS material (125), where a
	// refusal would say so.
	out, _ = run(`LZ_HOLDER_CHILD= LZ_HELPER_SOCK=$LAZARET_SESSION_SOCKET ` + os.Args[0] + ` -test.run=^TestHelperConnect$`)
	if !strings.Contains(out, "code 125 <nil>") {
		t.Fatalf("a process of the session was not served:\n%s", out)
	}
}
