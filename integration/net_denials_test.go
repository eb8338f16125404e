//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// Network denials reach the user (docs/NETWORK.md, "Denial notices and
// prompts"): a one-line notice on the stderr of every session, and at a
// terminal a prompt whose [O] lets the waiting lookup resolve.

// lockedBuffer is an io.Writer safe to read while a command writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hostileQuery is a bash command sending netd one A query for the name
// "ev<ESC>[31mil.test" (an escape sequence inside a label), as any
// program in the sandbox can.
const hostileQuery = `printf '\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x09ev\x1b[31mil\x04test\x00\x00\x01\x00\x01' > /dev/udp/127.0.0.1/53`

// netStatus is `lazaret net status --json`.
// netRunning reports whether the sandbox's netd answers `net status`:
// with nothing running the command still succeeds (it shows the
// configured policy), with "running": false.
func netRunning(env *Env) bool {
	r := env.Run("net", "status", "--json")
	var st struct {
		Running *bool `json:"running"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &st) != nil {
		return false
	}
	return st.Running == nil || *st.Running
}

func netStatus(t *testing.T, env *Env) netdapi.Status {
	t.Helper()
	var st netdapi.Status
	if err := json.Unmarshal([]byte(env.MustRun("net", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestNetDenialNoticeExec: a non-interactive `lazaret exec` whose command
// looks up denied names gets one line per name on stderr, starting with
// "lazaret: ", naming the name and the exact allow command; a repeated
// lookup of the same name gets no second line; a name carrying an escape
// sequence is shown escaped. Positive control: netd did receive the raw
// escape byte in the name (its status lists it), so the escaping is what
// kept it off the terminal.
func TestNetDenialNoticeExec(t *testing.T) {
	env := NewEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	script := `getent hosts blocked.test; echo "rc=$?"; ` + hostileQuery + `; getent hosts blocked.test; getent hosts blocked.test; ` +
		`getent hosts marker.test; echo done; sleep 300`
	cmd := env.Cmd(ctx, "exec", "--", "bash", "-c", script)
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	Eventually(t, 2*time.Minute, "the marker's notice", func() bool { return strings.Contains(stderr.String(), `"marker.test"`) })
	out, errOut := stdout.String(), stderr.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	if !strings.Contains(out, "rc=2") {
		t.Errorf("the denied lookup did not fail: %q", out)
	}
	want := `lazaret: network: denied DNS lookup of "blocked.test"; to allow it: lazaret net allow blocked.test`
	if n := strings.Count(errOut, want); n != 1 {
		t.Errorf("%d notices for blocked.test (want exactly 1 line %q)", n, want)
	}
	if !strings.Contains(errOut, `lazaret: network: denied DNS lookup of "ev\x1b[31mil.test" (not a name the policy can list)`) {
		t.Errorf("the hostile name is not shown escaped:\n%q", errOut)
	}
	if strings.ContainsRune(errOut, 0x1b) {
		t.Errorf("a raw escape byte reached stderr: %q", errOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if !strings.HasPrefix(l, "lazaret: ") {
			t.Errorf("stderr line not from lazaret: %q", l)
		}
	}
	raw := false
	for _, d := range netStatus(t, env).Denials {
		raw = raw || d.Dest == "dns ev\x1b[31mil.test"
	}
	if !raw {
		t.Error("control: netd never saw the raw name")
	}
}

// redirectUpstream points netd's upstream resolver (slirp's 10.0.2.3) at
// the test host's DNS server: a route in the sandbox's namespace and a
// DNAT on the test host, so a name allowed at the prompt is answered by
// the test's own server (there is no real DNS on these machines).
func redirectUpstream(t *testing.T, f *netFixture, sidecarName, server string) {
	t.Helper()
	c := "nsenter -t " + f.pid(sidecarName) + " -n "
	s := "nsenter -t " + f.pid(server) + " -n /usr/sbin/nft "
	script := strings.Join([]string{
		c + "ip route add 10.0.2.3/32 via 192.0.2.53 dev lzv0",
		s + "add table ip lzt",
		s + "'add chain ip lzt pre { type nat hook prerouting priority -100; }'",
		s + "add rule ip lzt pre ip daddr 10.0.2.3 udp dport 53 dnat to 192.0.2.53",
		s + "add rule ip lzt pre ip daddr 10.0.2.3 tcp dport 53 dnat to 192.0.2.53",
	}, "\n")
	if out, err := exec.Command("podman", "unshare", "sh", "-ec", script).CombinedOutput(); err != nil {
		t.Fatalf("redirecting netd's upstream: %v\n%s", err, out)
	}
}

// TestNetDenialPromptPTY: under a terminal (`lazaret shell`), a lookup of
// a denied name waits and the prompt appears, naming the name and its
// registrable domain; [D] makes the lookup fail (the positive control:
// without an allow the name does not resolve), [O] makes the waiting
// lookup resolve and the connection to the test host it names work, and
// a name allowed at the prompt whose answer is a documentation address
// still opens nothing (the DNS answer filter applies). The audit trail
// records the decisions with the names.
func TestNetDenialPromptPTY(t *testing.T) {
	f := newNetFixture(t)
	env := NewEnv(t)
	sh := startPTY(t, env, "shell")
	Eventually(t, 2*time.Minute, "net status to answer", func() bool { return netRunning(env) })
	Eventually(t, time.Minute, "netd to hold denied names", func() bool { return netStatus(t, env).Hold > 0 })
	rt, _ := domain.RuntimeDir()
	a, err := domain.New("default", env.Workspace, env.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	server := "lzt-deny-srv-" + f.suffix
	f.startServer(server)
	f.wire(a.Sidecar(), server)
	redirectUpstream(t, f, a.Sidecar(), server)

	sh.send("getent hosts denyme.test; echo \"RC1=$?\"\r")
	sh.waitFor("[O] allow once")
	if !strings.Contains(sh.output(), "name:              denyme.test") || !strings.Contains(sh.output(), "registrable domain: denyme.test") {
		t.Errorf("the prompt does not name the name:\n%s", sh.output())
	}
	if strings.Contains(sh.output(), "RC1=2") || strings.Contains(sh.output(), "RC1=0") {
		t.Fatal("the lookup ended before the answer")
	}
	waitReadable()
	sh.send("d")
	sh.waitFor("RC1=2")
	if strings.Contains(sh.output(), `denied DNS lookup of "denyme.test"`) {
		t.Error("a notice repeats the answer just given")
	}

	sh.send("bash -c 'exec 3<>/dev/tcp/allowme.test/80 && head -1 <&3'; echo \"RC2=$?\"\r")
	Eventually(t, 2*time.Minute, "the second prompt", func() bool { return strings.Count(sh.output(), "[O] allow once") == 2 })
	waitReadable()
	sh.send("o")
	sh.waitFor("RC2=0")
	if !strings.Contains(sh.output(), "\nok\r") && !strings.Contains(sh.output(), "ok\r\n") {
		t.Errorf("the test host did not answer:\n%s", sh.output())
	}
	// Allowing a name never opens what its answer may not: doc.test
	// answers 192.0.2.30 (documentation range) on the same test host.
	sh.send("bash -c 'exec 3<>/dev/tcp/doc.test/80 && head -1 <&3'; echo \"RC3=$?\"\r")
	Eventually(t, 2*time.Minute, "the third prompt", func() bool { return strings.Count(sh.output(), "[O] allow once") == 3 })
	waitReadable()
	sh.send("o")
	sh.waitFor("RC3=1")
	st := netStatus(t, env)
	for _, r := range st.Resolved {
		if r.Addr == "192.0.2.30" {
			t.Error("an address from the documentation range was opened")
		}
	}
	allowed := false
	for _, d := range st.Policy.AllowDomains {
		allowed = allowed || d.Pattern == "allowme.test"
		if d.Pattern == "denyme.test" {
			t.Error("a denied name is in the policy")
		}
	}
	if !allowed {
		t.Errorf("allowme.test not in the policy: %+v", st.Policy.AllowDomains)
	}
	audit := env.MustRun("audit", "--json")
	for _, want := range []string{`"name":"denyme.test"`, `"decision":"denied"`, `"name":"allowme.test"`, `"decision":"allowed once"`} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit trail lacks %s:\n%s", want, audit)
		}
	}
	t.Logf("terminal:\n%s", sh.output())
	sh.send("exit\r")
	if code := sh.exit(); code != 0 {
		t.Errorf("shell exit %d:\n%s", code, sh.output())
	}
}
