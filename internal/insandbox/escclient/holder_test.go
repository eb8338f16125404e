package escclient

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

	"github.com/lazaret-dev/lazaret/internal/engine/session"
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

// ParseDelegation takes the CLI's lines and refuses anything else
// without quoting it (a line may hold the key).
func TestParseDelegation(t *testing.T) {
	a, _ := session.New()
	del, err := a.Delegate("0123456789ab", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	good := strings.Join(del.Env(), "\n")
	got, err := ParseDelegation([]byte(good + "\n"))
	if err != nil || !got.Key.Equal(del.Key) || got.SessionID != del.SessionID {
		t.Fatalf("good delegation: %v", err)
	}
	for name, blob := range map[string]string{
		"empty":     "",
		"twice":     good + "\n" + del.Env()[2],
		"other var": good + "\nPATH=/x",
		"no equals": good + "\nsecretsecret",
		"key only":  del.Env()[2],
		"too long":  good + "\n" + strings.Repeat("x", maxDelegationBlob),
	} {
		_, err := ParseDelegation([]byte(blob))
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "secretsecret") || strings.Contains(err.Error(), del.Env()[2]) {
			t.Errorf("%s: the error quotes the input: %v", name, err)
		}
	}
}

func FuzzParseDelegation(f *testing.F) {
	a, _ := session.New()
	del, _ := a.Delegate("0123456789ab", time.Hour, time.Now())
	f.Add([]byte(strings.Join(del.Env(), "\n") + "\n"))
	f.Add([]byte("LAZARET_SESSION_ID=x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := ParseDelegation(b); err == nil && d.Key == nil {
			t.Fatal("accepted without a key")
		}
	})
}
