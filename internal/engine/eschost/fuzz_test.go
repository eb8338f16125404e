package eschost

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/shellwords"
	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

// FuzzVerify feeds mutated request lines to the verification pipeline of
// a server whose session is known. Whatever passes must be exactly the
// request the session's delegated key signed: no mutation survives.
func FuzzVerify(f *testing.F) {
	sess, _ := session.New()
	now := time.Unix(2e9, 0)
	d, _ := sess.Delegate(testSandbox, time.Hour, now)
	orig := &escwire.Request{RequestID: escwire.RandomID(), SessionID: sess.ID, Profile: "claude", Cwd: "/workspace",
		Argv: []string{"make", "lint"}, Justification: "j", Timestamp: now.UnixMilli(), Nonce: escwire.RandomID(), Delegation: d.Delegation}
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
// runs, equals an auto_approve entry or extends one ending in {args} by
// plain words only, and names no banned executable.
func FuzzPolicy(f *testing.F) {
	for _, s := range []string{"echo hi", "echo 'a b'", "echo hi; id", "echo --x", "echo $(id)", "echo \x1b[2J",
		"echo\thi", `echo "a\"b"`, "ls", "echo hi\nid", "sh -c id", "echo\u00a0x", "echo a\\ b", "ls -l x",
		"echo SHELL=/bin/cat", "echo ../x", "echo /etc/passwd", "echo +x", "echo ~", "echo .SHELLFLAGS=x"} {
		f.Add(s)
	}
	p := &Policy{AutoApprove: [][]string{{"echo", "{args}"}, {"ls", "-l"}, {"sh"}}, Path: "/usr/bin:/bin", Workspace: f.TempDir()}
	f.Fuzz(func(t *testing.T, cmd string) {
		checkApproved(t, p, cmd, p.Evaluate(nil, cmd, p.Workspace))
	})
}

// FuzzEntryMatch: any auto_approve entry ParseEntry accepts, matched
// against any command: what is approved is the entry's exact words plus,
// only for an {args} entry, plain words.
func FuzzEntryMatch(f *testing.F) {
	f.Add("echo {args}", "echo hi")
	f.Add("echo", "echo SHELL=/bin/cat")
	f.Add("make lint {args}", "make lint .SHELLFLAGS=x")
	f.Add("true {args}", "true ../x")
	f.Add("true x {args} y", "true x y")
	f.Add("true '{args}'", "true {args}")
	ws := f.TempDir()
	f.Fuzz(func(t *testing.T, entry, cmd string) {
		fixed, args, err := shellwords.ParseEntry(entry)
		if err != nil {
			return
		}
		if len(fixed) == 0 || slices.Contains(fixed, shellwords.ArgsPlaceholder) {
			t.Fatalf("ParseEntry(%q) = %q, %v", entry, fixed, args)
		}
		e := slices.Clone(fixed)
		if args {
			e = append(e, shellwords.ArgsPlaceholder)
		}
		p := &Policy{AutoApprove: [][]string{e}, Path: "/usr/bin:/bin", Workspace: ws}
		checkApproved(t, p, cmd, p.Evaluate(nil, cmd, ws))
	})
}

// checkApproved fails when v auto-approves cmd against p's rules.
func checkApproved(t *testing.T, p *Policy, cmd string, v Verdict) {
	t.Helper()
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
	if shellwords.BannedReason(v.Executable) != "" || shellwords.BannedEntryReason(argv) != "" {
		t.Fatalf("%q: banned executable auto-approved", cmd)
	}
	for _, e := range p.AutoApprove {
		fixed, args := splitEntry(e)
		if len(argv) < len(fixed) || !slices.Equal(argv[:len(fixed)], fixed) || (!args && len(argv) != len(fixed)) {
			continue
		}
		if !slices.ContainsFunc(argv[len(fixed):], func(a string) bool {
			return shellwords.PlainWordReason(a) != "" || strings.ContainsAny(a, "=~") || strings.HasPrefix(a, "-")
		}) {
			return
		}
	}
	t.Fatalf("%q auto-approved without a matching entry", cmd)
}
