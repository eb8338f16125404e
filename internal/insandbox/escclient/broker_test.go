package escclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/trust"
)

func TestBrokerRequestRoundTrip(t *testing.T) {
	in := &BrokerRequest{Cwd: "/workspace/sub", Args: []string{"lazaret-escalate", "--", "echo", "", "a b"}}
	b, err := EncodeBrokerRequest(in, []string{"LAZARET_SESSION_ID=s1", "LAZARET_X=a=b", "LAZARET_SESSION_ID=s2"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadBrokerRequest(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got.Cwd != in.Cwd || !slices.Equal(got.Args, in.Args) {
		t.Fatalf("got %+v", got)
	}
	if got.Getenv("LAZARET_SESSION_ID") != "s1" || got.Getenv("LAZARET_X") != "a=b" || got.Getenv("PATH") != "" {
		t.Fatalf("env %v", got.Env)
	}
	if got.Getenv(EnvCwd) != "/workspace/sub" {
		t.Fatalf("cwd via getenv = %q", got.Getenv(EnvCwd))
	}
	got.Env[EnvCwd] = "/elsewhere"
	if got.Getenv(EnvCwd) != "/elsewhere" {
		t.Fatal("a forwarded LAZARET_ESCALATE_CWD does not win")
	}
}

func TestBrokerRequestRejects(t *testing.T) {
	frame := func(body string) []byte {
		b := []byte(BrokerMagic + "\x00\x00\x00\x00" + body)
		binary.BigEndian.PutUint32(b[4:8], uint32(len(body)))
		return b
	}
	big := make([]byte, 8)
	copy(big, BrokerMagic)
	binary.BigEndian.PutUint32(big[4:], MaxBrokerRequest+1)
	for name, b := range map[string][]byte{
		"empty":          nil,
		"short header":   []byte("LZB1\x00"),
		"magic":          []byte("LZB2\x00\x00\x00\x01\x00"),
		"too long":       big,
		"truncated body": []byte("LZB1\x00\x00\x00\x09c/\x00ax\x00"),
		"no body":        frame(""),
		"no NUL":         frame("c/\x00ax"),
		"no tag":         frame("c/\x00\x00ax\x00"),
		"unknown tag":    frame("c/\x00ax\x00zq\x00"),
		"two cwd":        frame("c/\x00c/tmp\x00ax\x00"),
		"no cwd":         frame("ax\x00"),
		"empty cwd":      frame("c\x00ax\x00"),
		"no args":        frame("c/\x00"),
		"env not ours":   frame("c/\x00ax\x00ePATH=/bin\x00"),
		"env no =":       frame("c/\x00ax\x00eLAZARET_X\x00"),
	} {
		if _, err := ReadBrokerRequest(bytes.NewReader(b)); !errors.Is(err, ErrBrokerRequest) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := EncodeBrokerRequest(&BrokerRequest{Cwd: "/", Args: []string{"a\x00b"}}, nil); err == nil {
		t.Error("NUL encoded")
	}
}

func FuzzBrokerRequest(f *testing.F) {
	f.Add([]byte("c/workspace\x00alazaret-escalate\x00a--\x00atrue\x00eLAZARET_SESSION_ID=x\x00"))
	f.Add([]byte("c/\x00a\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseBrokerRequest(body)
		if err != nil {
			if !errors.Is(err, ErrBrokerRequest) {
				t.Fatalf("error not wrapped: %v", err)
			}
			return
		}
		if r.Cwd == "" || len(r.Args) == 0 {
			t.Fatalf("accepted without cwd or args: %+v", r)
		}
		var env []string
		for k, v := range r.Env {
			if !strings.HasPrefix(k, "LAZARET_") {
				t.Fatalf("accepted variable %q", k)
			}
			env = append(env, k+"="+v)
		}
		b, err := EncodeBrokerRequest(r, env)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := ReadBrokerRequest(bytes.NewReader(b))
		if err != nil || r2.Cwd != r.Cwd || !slices.Equal(r2.Args, r.Args) || len(r2.Env) != len(r.Env) {
			t.Fatalf("round trip: %+v, %v", r2, err)
		}
	})
}

// brokerPair starts a Broker with run on a temporary socket.
func brokerPair(t *testing.T, run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int) string {
	t.Helper()
	ln, p := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&Broker{Run: run}).Serve(ctx, ln)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// readFrames reads answer frames until FrameCode or the end.
func readFrames(t *testing.T, r io.Reader) (types string, out, errOut string, code int) {
	t.Helper()
	code = -1
	for {
		var h [5]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(h[1:])
		if n > MaxBrokerChunk {
			t.Fatalf("frame of %d bytes", n)
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(r, data); err != nil {
			t.Fatal(err)
		}
		types += string(h[0])
		switch h[0] {
		case FrameOut:
			out += string(data)
		case FrameErr:
			errOut += string(data)
		case FrameCode:
			code = int(int32(binary.BigEndian.Uint32(data)))
			return
		}
	}
}

func TestBrokerServes(t *testing.T) {
	p := brokerPair(t, func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		_, _ = io.WriteString(stdout, strings.Join(args, ",")+" "+getenv(EnvCwd)+" "+getenv("LAZARET_A"))
		_, _ = stderr.Write(bytes.Repeat([]byte("e"), MaxBrokerChunk+10))
		return 42
	})
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := EncodeBrokerRequest(&BrokerRequest{Cwd: "/w", Args: []string{"x", "--", "true"}}, []string{"LAZARET_A=1"})
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	types, out, errOut, code := readFrames(t, c)
	if types != "koeex" || out != "x,--,true /w 1" || len(errOut) != MaxBrokerChunk+10 || code != 42 {
		t.Fatalf("types %q out %q stderr %d bytes code %d", types, out, len(errOut), code)
	}
}

func TestBrokerNoAckOnBadRequest(t *testing.T) {
	p := brokerPair(t, func(context.Context, []string, func(string) string, io.Writer, io.Writer) int {
		t.Error("a malformed request ran")
		return 0
	})
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("LZB1\x00\x00\x00\x02ax"))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 16)); err != io.EOF {
		t.Fatalf("read %d, %v; want EOF without an acknowledgement", n, err)
	}
}

func TestBrokerCancelsWhenFrontEndLeaves(t *testing.T) {
	cancelled := make(chan struct{})
	p := brokerPair(t, func(ctx context.Context, _ []string, _ func(string) string, _, _ io.Writer) int {
		select {
		case <-ctx.Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
		return 0
	})
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := EncodeBrokerRequest(&BrokerRequest{Cwd: "/", Args: []string{"x"}}, nil)
	_, _ = c.Write(b)
	var h [5]byte
	if _, err := io.ReadFull(c, h[:]); err != nil || h[0] != FrameAck {
		t.Fatalf("ack: %q %v", h, err)
	}
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("request not cancelled when the front end closed the connection")
	}
}

func TestBrokerConfigCacheFollowsRotation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	ta, err := trust.Start(trust.Options{Dir: dir, Profile: "p", SandboxID: "0123456789ab"})
	if err != nil {
		t.Fatal(err)
	}
	defer ta.Close()
	var c configCache
	cfg1, leaf1, err := c.load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg2, _, err := c.load(dir); err != nil || cfg2 != cfg1 {
		t.Fatalf("unchanged bundle parsed again (%v)", err)
	}
	if err := ta.Rotate(); err != nil {
		t.Fatal(err)
	}
	cfg3, leaf3, err := c.load(dir)
	if err != nil || cfg3 == cfg1 || leaf3.SerialNumber.Cmp(leaf1.SerialNumber) == 0 {
		t.Fatalf("rotation not seen (%v)", err)
	}
}
