//go:build integration

package integration

import (
	"regexp"
	"strings"
	"testing"
)

// attackScript runs as root in the sandbox, in the second session, while
// the first runs `sleep 4242` (its marker) and has used its signer. It
// looks for the first session's processes through /proc and kill, lowers
// yama's ptrace_scope as the original attack did, tries the first
// session's socket ($1), and tries to rename or replace every path under
// /run/lazaret (and /run itself). The controls run the same probes
// against what they must work on: a process of its own session holding a
// key in its environment, and a plain directory of the same shape as
// /run/lazaret/bin.
const attackScript = `
one_sock=$1
CONTROL_KEY=control-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
echo 0 > /proc/sys/kernel/yama/ptrace_scope 2>/dev/null && echo ptrace-scope-lowered
env LAZARET_DELEGATED_KEY=$CONTROL_KEY sleep 4243 &
ctl=$!
sleep 0.5
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  # Its own shell (whose argv is this script) and its own holder (PID 1).
  [ "$pid" = "$$" ] || [ "$pid" = 1 ] && continue
  cl=$(tr '\0' ' ' < $p/cmdline 2>/dev/null)
  case "$cl" in
  "sleep 4242 "*|*"__signer "*|*"__session "*) echo "foreign $pid $cl" ;;
  "sleep 4243 "*)
    echo "control $pid"
    grep -a -q "LAZARET_DELEGATED_KEY=$CONTROL_KEY" $p/environ && echo "control-environ-read"
    kill -0 $pid && echo "control-signal-ok" ;;
  esac
done
# Every pid kill can reach is this session's (the shell, its children, X).
seen=0; for pid in $(seq 1 400); do kill -0 $pid 2>/dev/null && seen=$((seen+1)); done
echo "signalable $seen"
echo "procs $(ls -d /proc/[0-9]* | wc -l)"
out=$(LAZARET_SESSION_SOCKET=$one_sock lazaret-escalate -- echo stolen-signature 2>&1); echo "foreign-socket rc=$? $out"
# The shared broker binds its socket a moment after the start: wait for
# it, so that the probe below tries it (it did not when it ran first).
for i in $(seq 100); do [ -S /run/lazaret/escalate-broker/sock ] && break; sleep 0.2; done
[ -S /run/lazaret/escalate-broker/sock ] && echo broker-present
for p in /run /run/lazaret /run/lazaret/* /run/lazaret/*/*; do
  [ -e "$p" ] || continue
  if mv "$p" "$p.moved" 2>/dev/null; then echo "renamed $p"; mv "$p.moved" "$p"; fi
done
for d in /run/lazaret /run/lazaret/bin /run/lazaret/session /run/lazaret/pids; do
  if echo x > "$d/planted" 2>/dev/null; then echo "planted $d"; fi
done
mkdir -p /tmp/ctl/bin && echo x > /tmp/ctl/bin/lazaret-escalate && mv /tmp/ctl /tmp/ctl.moved && echo control-renamed
out=$(lazaret-escalate -- echo own-signature 2>&1); echo "own-socket rc=$? $out"
kill $ctl
echo attack-done
`

// TestSessionIsolation: two sessions on one sandbox, the first at a
// terminal, the second unattended and hostile (root in the sandbox, with
// the capabilities every session has). The second cannot see, signal or
// read any process of the first (the holder runs each session in PID and
// mount namespaces of its own), cannot reach the first's holder socket,
// and cannot rename or plant anything under /run/lazaret, where the
// holder and signer binaries, the sockets and the TLS directory are.
// Controls: the same probes find, read and signal a process of the
// attacker's own session, rename a plain directory of the same shape, and
// the attacker's own requests are signed. The first session then still
// escalates as itself, and its signer, killed, is said on its terminal.
func TestSessionIsolation(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("[escalation]\nauto_approve = [\"echo {args}\"]\n")
	one := startPTY(t, e, "shell")
	one.send("lazaret-escalate -- echo from-session-$((1*1)); sleep 4242 & echo sock=$LAZARET_SESSION_SOCKET id=$LAZARET_SESSION_ID; echo one-$((2*3))\r")
	one.waitFor("one-6")
	if !strings.Contains(one.output(), "from-session-1") {
		t.Fatalf("session one cannot escalate:\n%s", one.output())
	}
	m := regexp.MustCompile(`sock=(/\S+) id=(\w+)`).FindStringSubmatch(one.output())
	if m == nil {
		t.Fatalf("session one has no socket:\n%s", one.output())
	}
	r := e.Run("exec", "--", "sh", "-c", attackScript, "sh", m[1])
	out := r.Stdout + r.Stderr
	if !strings.Contains(out, "attack-done") {
		t.Fatalf("attack script: exit %d\n%s", r.Code, out)
	}
	t.Logf("attack:\n%s", out)
	for _, line := range strings.Split(out, "\n") {
		for _, bad := range []string{"foreign ", "renamed ", "planted "} {
			if strings.HasPrefix(line, bad) {
				t.Errorf("the second session got through: %s", line)
			}
		}
	}
	// The first session's socket path names, in the second session's
	// mount namespace, the second's own: whatever answered there signed
	// as the second session, never as the first.
	trail := e.MustRun("audit", "--json")
	for _, line := range strings.Split(trail, "\n") {
		if strings.Contains(line, "stolen-signature") && strings.Contains(line, `"session":"`+m[2]+`"`) {
			t.Errorf("a request of the second session was signed as the first:\n%s", line)
		}
	}
	if !strings.Contains(trail, "stolen-signature") || !strings.Contains(trail, `"session":"`+m[2]+`"`) {
		t.Errorf("control: the audit trail does not show the requests with their sessions:\n%s", trail)
	}
	for _, want := range []string{"control ", "control-signal-ok", "control-renamed", "own-socket rc=0 own-signature", "broker-present"} {
		if !strings.Contains(out, want) {
			t.Errorf("control %q missing: the probe cannot see what it looks for:\n%s", want, out)
		}
	}
	// Its own X, shell and control sleep: a handful. Without isolation
	// it reaches every process of the sandbox (the first session's, the
	// broker, init).
	if n := regexp.MustCompile(`signalable (\d+)`).FindStringSubmatch(out); n == nil || n[1] == "0" || len(n[1]) > 1 {
		t.Errorf("the second session can signal more than its own few processes: %v", n)
	}

	// Session one is untouched: it escalates as itself; its signer,
	// killed from its own session, is said on its terminal and restarts.
	one.send("kill -9 $(for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline | grep -q __signer && echo ${p#/proc/}; done); sleep 1; lazaret-escalate -- echo again-$((3*3))\r")
	one.waitFor("again-9")
	if !strings.Contains(one.output(), "signer ended") {
		t.Errorf("the killed signer was not said on the session's terminal:\n%s", one.output())
	}
	one.send("exit\r")
	if code := one.exit(); code != 0 {
		t.Errorf("session one: exit %d\n%s", code, one.output())
	}
}

// gitSpy replaces the image's git (the agent's to replace: /usr is its)
// with a script that records, each time anything runs it, PID 1 of its
// namespace and every process it can see, then runs the real git.
const gitSpy = `set -e
mv /usr/bin/git /usr/bin/git.real
cat > /usr/bin/git <<'SPY'
#!/bin/sh
{ echo "pid1=$(tr '\0' ' ' < /proc/1/cmdline)"; for p in /proc/[0-9]*; do echo "sees $(tr '\0' ' ' < $p/cmdline 2>/dev/null)"; done; } > /tmp/spy.$$ 2>/dev/null
exec /usr/bin/git.real "$@"
SPY
chmod 755 /usr/bin/git
echo spy-in`

// TestSessionIsolationLazaretsGit: lazaret's own commands in the sandbox
// run the image's git (the ref sync after a commit, `lazaret diff
// --uncommitted`), which the agent can replace. They run under the
// isolating holder, so the agent's git sees no session's processes.
// Control: the spy records each run (its PID 1 is the holder's, not the
// sandbox's init), and sees the processes of its own namespace.
func TestSessionIsolationLazaretsGit(t *testing.T) {
	e := NewEnv(t)
	gsRepo(t, e.Workspace)
	one := startPTY(t, e, "shell")
	one.send("sleep 4242 & echo one-$((2*3))\r")
	one.waitFor("one-6")
	if out := e.MustRun("exec", "--", "sh", "-c", gitSpy); !strings.Contains(out, "spy-in") {
		t.Fatalf("spy: %s", out)
	}
	e.MustRun("exec", "--", "sh", "-c", "echo x >> spied.txt && git add spied.txt && git commit -q -m spied && echo agent-change >> spied.txt")
	if out := e.MustRun("diff", "--uncommitted"); !strings.Contains(out, "agent-change") {
		t.Errorf("lazaret diff --uncommitted lacks the change:\n%s", out)
	}
	spied := e.MustRun("exec", "--", "sh", "-c", "cat /tmp/spy.*")
	t.Logf("spy:\n%s", spied)
	lazarets := 0
	for _, rec := range strings.Split(spied, "pid1=")[1:] {
		if !strings.Contains(rec, "--no-key") {
			continue // the agent's own git, in its own session
		}
		lazarets++
		if strings.Contains(rec, "sleep 4242") {
			t.Errorf("lazaret's git in the sandbox sees the shell's processes:\n%s", rec)
		}
		if !strings.Contains(rec, "sees /usr/bin/git.real") && !strings.Contains(rec, "sees /bin/sh /usr/bin/git") {
			t.Errorf("control: the spy does not see its own process:\n%s", rec)
		}
	}
	if lazarets == 0 {
		t.Errorf("control: lazaret ran no git in the sandbox under its holder (diff --uncommitted, ref sync):\n%s", spied)
	}
	one.send("exit\r")
	one.exit()
}
