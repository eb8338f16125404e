//go:build integration

package integration

import (
	"regexp"
	"strings"
	"testing"
)

// floodScript, in the sandbox: 300 escalation requests at once (each
// auto-approved), one request whose argv is over a megabyte, and 600
// lookups of names nobody allowed; then what the session can still do.
const floodScript = `
i=0; while [ $i -lt 300 ]; do lazaret-escalate -- echo n$i >/tmp/o.$i 2>/tmp/e.$i & i=$((i+1)); done; wait
ok=0; i=0; while [ $i -lt 300 ]; do [ "$(cat /tmp/o.$i)" = "n$i" ] && ok=$((ok+1)); i=$((i+1)); done
echo "served $ok"
cat /tmp/e.* | sort | uniq -c | sort -rn | head -3
set -- $(seq 1 200000)
lazaret-escalate -- echo "$@" >/dev/null 2>/tmp/big.err; echo "big rc=$?"; cat /tmp/big.err
i=0; while [ $i -lt 600 ]; do getent hosts n$i.flood.test >/dev/null & i=$((i+1)); [ $((i % 100)) = 0 ] && wait; done; wait
lazaret-escalate -- echo after-flood
echo flood-done
`

// TestSecEscalationFlood: what an agent can throw at the host through the
// escalation channel and the resolver at once. Every one of 300
// simultaneous requests is served (before, a full listen queue and the
// busy signer and coordinator refused about one in six with unclear
// errors), a request over the size limit is refused with a message that
// says so, a flood of denied lookups does not stop the next request, and
// the sandbox stops clean afterwards.
func TestSecEscalationFlood(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("[escalation]\nauto_approve = [\"echo {args}\"]\n")
	r := e.Run("exec", "--", "sh", "-c", floodScript)
	out := r.Stdout + r.Stderr
	if !strings.Contains(out, "flood-done") {
		t.Fatalf("exit %d:\n%s", r.Code, out)
	}
	if m := regexp.MustCompile(`served (\d+)`).FindStringSubmatch(out); m == nil || m[1] != "300" {
		t.Errorf("not every simultaneous request was served: %v\n%s", m, out)
	}
	if !strings.Contains(out, "big rc=125") || !strings.Contains(out, "too long for host escalation") {
		t.Errorf("the oversized request was not refused as too long:\n%s", out)
	}
	if !strings.Contains(r.Stdout, "after-flood\n") {
		t.Errorf("no request went through after the lookup flood:\n%s", out)
	}
	// The host ran exactly the 301 approved commands, each audited.
	trail := e.MustRun("audit")
	if n := strings.Count(trail, "escalation.result"); n != 301 {
		t.Errorf("%d escalation results in the audit trail, want 301", n)
	}
	e.MustRun("stop")
	if out, _ := Podman(t, "ps", "-a", "--filter", "label=lazaret.data_root="+e.DataRoot, "--format", "{{.Names}}"); strings.TrimSpace(out) != "" {
		t.Errorf("left after lazaret stop: %s", out)
	}
}
