package fsmonitor

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	tok := Token{Instance: "0123456789abcdef", Seq: 42}
	got, err := ParseToken(tok.String())
	if err != nil || got != tok {
		t.Fatalf("ParseToken(%q) = %v, %v", tok.String(), got, err)
	}
	for _, bad := range []string{"", FallbackToken, "lzfsm:0123456789abcdef", "lzfsm:0123456789abcdef:",
		"lzfsm:0123456789ABCDEF:1", "lzfsm:0123456789abcdef:01", "lzfsm:0123456789abcdef:-1",
		"lzfsm:0123456789abcdef:1 ", "lzfsm:0123456789abcdef:99999999999999999999", "1700000000000000000",
		"lzfsm:0123456789abcde:1", "lzfsm:0123456789abcdef:1:2"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
}

func TestFrameRoundTrip(t *testing.T) {
	for _, a := range []Answer{{Token: "t", Full: true}, {Token: "t"}, {Token: "t", Paths: []string{"a", "b/c", "with\nnewline"}}} {
		var buf bytes.Buffer
		if err := WriteFrame(&buf, a.Bytes()); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFrame(bufio.NewReader(&buf))
		if err != nil || !bytes.Equal(got, a.Bytes()) {
			t.Fatalf("ReadFrame = %q, %v; want %q", got, err, a.Bytes())
		}
	}
	for _, bad := range []string{"", "5\nab", "3\n\x00a\x00", "2\n\x00\x00", "4\nt\x00\x00\x00", "x\n", "-1\n", "01\n\x00",
		"99999999999\n", "3\nt\x00a"} {
		if _, err := ReadFrame(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("ReadFrame(%q) accepted", bad)
		}
	}
}

func TestRequestRoundTrip(t *testing.T) {
	r := Request{Dir: "/workspace", Token: "lzfsm:none"}
	b, err := EncodeRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadRequest(bufio.NewReader(bytes.NewReader(b)))
	if err != nil || got != r {
		t.Fatalf("ReadRequest = %v, %v", got, err)
	}
	if _, err := EncodeRequest(Request{Dir: "/a\nb"}); err == nil {
		t.Error("a newline in the directory was encoded")
	}
	if _, err := ReadRequest(bufio.NewReader(strings.NewReader(strings.Repeat("a", MaxRequestField+1) + "\n\n"))); err == nil {
		t.Error("an oversized field was read")
	}
}

// The daemon parses requests from any process in the sandbox, and git's
// token comes from an index the agent can write.
func FuzzParseToken(f *testing.F) {
	f.Add("lzfsm:0123456789abcdef:42")
	f.Add(FallbackToken)
	f.Add("1700000000000000000")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		if tok.String() != s {
			t.Fatalf("ParseToken(%q) = %v, which formats as %q", s, tok, tok.String())
		}
	})
}

func FuzzReadRequest(f *testing.F) {
	f.Add([]byte("/workspace\nlzfsm:0123456789abcdef:1\n"))
	f.Add([]byte("/workspace\n"))
	f.Add([]byte("\x00\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ReadRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		enc, err := EncodeRequest(r)
		if err != nil {
			t.Fatalf("read %v, which does not encode: %v", r, err)
		}
		if !bytes.HasPrefix(b, enc) {
			t.Fatalf("read %v from %q, which encodes as %q", r, b, enc)
		}
	})
}

// The hook reads what the daemon's socket says; the socket is in the
// sandbox, so anything may answer there.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte("20\nlzfsm:none\x00/\x00"))
	f.Add([]byte("6\nt\x00a/b\x00"))
	f.Add([]byte("2\nt\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ReadFrame(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		if len(p) == 0 || p[0] == 0 || p[len(p)-1] != 0 || bytes.Contains(p, []byte{0, 0}) {
			t.Fatalf("accepted a malformed answer %q", p)
		}
	})
}
