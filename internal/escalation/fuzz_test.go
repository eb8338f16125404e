package escalation

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/escalation/wire"
	"github.com/lazaret-dev/lazaret/internal/session"
	"github.com/lazaret-dev/lazaret/internal/shellwords"
	"github.com/lazaret-dev/lazaret/internal/trust"
)

// FuzzVerify feeds mutated request lines to the verification pipeline of
// a server whose session is known. Whatever passes must be exactly the
// request the session's delegated key signed: no mutation survives.
func FuzzVerify(f *testing.F) {
	sess, _ := session.New()
	now := time.Unix(2e9, 0)
	d, _ := sess.Delegate(testSandbox, time.Hour, now)
	orig := &wire.Request{RequestID: wire.RandomID(), SessionID: sess.ID, Profile: "claude", Cwd: "/workspace",
		Argv: []string{"make", "lint"}, Justification: "j", Timestamp: now.UnixMilli(), Nonce: wire.RandomID(), Delegation: d.Delegation}
	orig.Sign(d.Key)
	line, _ := orig.Encode()
	f.Add(line)
	f.Add(bytes.Replace(line, []byte(`"lint"`), []byte(`"lint","--eval=x"`), 1))
	f.Add(bytes.Replace(line, []byte(`"argv"`), []byte(`"command":"make lint; id","argv"`), 1))
	f.Add([]byte("{}"))
	u, _ := url.Parse(trust.SAN("claude", testSandbox))
	leaf := &x509.Certificate{URIs: []*url.URL{u}}
	cs := tls.ConnectionState{Version: tls.VersionTLS13, PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}
	reg := NewRegistry()
	reg.Register(&Session{ID: sess.ID, Public: sess.Public})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewServer(Config{Profile: "claude", SandboxID: testSandbox, Registry: reg, Now: func() time.Time { return now }}, nil)
		req, _, rej := s.Verify(cs, data)
		if rej != nil {
			return
		}
		if !bytes.Equal(req.Canonical(), orig.Canonical()) {
			t.Fatalf("a modified request passed verification: %+v", req)
		}
		if _, _, rej := s.Verify(cs, data); rej == nil || rej.Stage != StageReplay {
			t.Fatal("the same request passed twice")
		}
	})
}

// FuzzPolicy: a command string is auto-approved only if it has no shell
// metacharacter or control character, splits into exactly the argv that
// runs, starts with an auto_approve entry, appends no argument beginning
// with "-", and names no banned executable.
func FuzzPolicy(f *testing.F) {
	for _, s := range []string{"echo hi", "echo 'a b'", "echo hi; id", "echo --x", "echo $(id)", "echo \x1b[2J",
		"echo\thi", `echo "a\"b"`, "ls", "echo hi\nid", "sh -c id", "echo\u00a0x", "echo a\\ b"} {
		f.Add(s)
	}
	p := &Policy{AutoApprove: [][]string{{"echo"}, {"ls", "-l"}, {"sh"}}, Path: "/usr/bin:/bin"}
	f.Fuzz(func(t *testing.T, cmd string) {
		v := p.Evaluate(nil, cmd, "/")
		if !v.Auto {
			return
		}
		if shellwords.HasMeta(cmd) {
			t.Fatalf("%q auto-approved with a metacharacter", cmd)
		}
		argv, err := shellwords.Split(cmd)
		if err != nil || !slices.Equal(argv, v.Argv) {
			t.Fatalf("%q: runs %q but splits to %q (%v)", cmd, v.Argv, argv, err)
		}
		if shellwords.BannedReason(v.Executable) != "" || shellwords.BannedReason(argv[0]) != "" {
			t.Fatalf("%q: banned executable auto-approved", cmd)
		}
		ok := false
		for _, e := range p.AutoApprove {
			if len(argv) >= len(e) && slices.Equal(argv[:len(e)], e) &&
				!slices.ContainsFunc(argv[len(e):], func(a string) bool { return strings.HasPrefix(a, "-") }) {
				ok = true
			}
		}
		if !ok {
			t.Fatalf("%q auto-approved without a matching entry", cmd)
		}
	})
}
