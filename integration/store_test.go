//go:build integration

package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
)

// auditEntries runs `lazaret audit --json` and decodes its lines.
func auditEntries(t *testing.T, e *Env) []audit.Entry {
	t.Helper()
	out := e.MustRun("audit", "--json")
	var entries []audit.Entry
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var en audit.Entry
		if err := json.Unmarshal([]byte(line), &en); err != nil {
			t.Fatalf("audit --json line %q: %v", line, err)
		}
		entries = append(entries, en)
	}
	return entries
}

func byKind(entries []audit.Entry, k audit.Kind) []audit.Entry {
	var out []audit.Entry
	for _, e := range entries {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// TestStoreAuditThroughCoordinator runs a real sandbox (podman + runsc):
// while its coordinator holds the state store, a second opener is refused
// within its timeout naming the coordinator's pid, and the same audit query
// succeeds through the control socket; an auto-approved escalation is in
// the trail with its result digest; after the stop, the CLI reads the
// store directly and the chain still verifies.
func TestStoreAuditThroughCoordinator(t *testing.T) {
	e, d := lcEnv(t)
	e.WriteConfig("[escalation]\nauto_approve = [\"echo 'from host'\"]\n")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	holder := e.Cmd(ctx, "exec", "--", "sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); holder.Wait() }()
	Eventually(t, 2*time.Minute, "the sandbox to run", func() bool {
		return strings.Contains(e.Run("status", "--json").Stdout, `"running": true`)
	})

	out := e.MustRun("exec", "--", "lazaret-escalate", "--reason", "audit test", "--", "echo", "from host")
	if out != "from host\n" {
		t.Fatalf("escalation output %q", out)
	}

	// A run-time policy change is recorded.
	e.MustRun("net", "allow", "192.0.2.0/24", "--for", "1m")

	// The second opener: refused within its timeout, naming the
	// coordinator.
	pids := coordinatorPIDs(d.Resources["workspace"])
	if len(pids) != 1 {
		t.Fatalf("coordinators: %v", pids)
	}
	_, err := store.Open(ctx, d.Resources["state_db"], store.Options{Timeout: time.Second})
	var iu *store.InUseError
	want := fmt.Sprintf("state store %s is in use by coordinator pid %d", d.Resources["state_db"], pids[0])
	if !errors.As(err, &iu) || err.Error() != want {
		t.Fatalf("second opener: %v, want %q", err, want)
	}

	// The same query through the control socket.
	entries := auditEntries(t, e)
	if len(byKind(entries, audit.KindSandboxStart)) != 1 || len(byKind(entries, audit.KindSessionStart)) < 2 {
		t.Fatalf("lifecycle entries missing: %+v", entries)
	}
	req := byKind(entries, audit.KindEscalationRequest)
	dec := byKind(entries, audit.KindEscalationDecision)
	res := byKind(entries, audit.KindEscalationResult)
	if len(req) != 1 || len(dec) != 1 || len(res) != 1 {
		t.Fatalf("escalation entries: %d requests, %d decisions, %d results", len(req), len(dec), len(res))
	}
	pc := byKind(entries, audit.KindPolicyChange)
	if len(pc) != 1 || pc[0].Fields["action"] != "net allow" || pc[0].Fields["target"] != "192.0.2.0/24" || pc[0].Profile != "default" {
		t.Fatalf("policy change entries: %+v", pc)
	}
	sum := sha256.Sum256([]byte("from host\n"))
	if req[0].Request.Justification != "audit test" || dec[0].Decision.Outcome != audit.OutcomeAuto ||
		res[0].Result.ExitCode != 0 || res[0].Result.StdoutBytes != 10 || res[0].Result.StdoutSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("escalation entries: %+v %+v %+v", req[0].Request, dec[0].Decision, res[0].Result)
	}
	if out := e.MustRun("audit", "verify"); !strings.Contains(out, "audit trail verified") {
		t.Fatalf("verify through the socket: %q", out)
	}

	// Stop; the coordinator closes the store, and the CLI reads it itself.
	e.MustRun("stop")
	requireGone(t, d, 30*time.Second)
	after := auditEntries(t, e)
	if len(after) <= len(entries) || after[len(after)-1].Kind != audit.KindSandboxStop {
		t.Fatalf("after stop: last entry %+v", after[len(after)-1])
	}
	if len(byKind(after, audit.KindSessionEnd)) != len(byKind(after, audit.KindSessionStart)) {
		t.Fatalf("sessions not all ended: %+v", after)
	}
	if out := e.MustRun("audit", "verify"); !strings.Contains(out, fmt.Sprintf("%d entries", len(after))) {
		t.Fatalf("verify after stop: %q", out)
	}
	t.Logf("lazaret audit:\n%s", e.MustRun("audit"))
	st, err := store.Open(ctx, d.Resources["state_db"], store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("open after stop: %v", err)
	}
	defer st.Close()
	sessions, err := st.Sessions(ctx, 0)
	if err != nil || len(sessions) < 2 {
		t.Fatalf("sessions recorded: %+v %v", sessions, err)
	}
	esc, ok, err := st.Escalation(ctx, req[0].Request.RequestID)
	if err != nil || !ok || esc.Outcome != "auto" || esc.ExitCode == nil || *esc.ExitCode != 0 || len(esc.AuditSeqs) != 3 {
		t.Fatalf("escalation state: %+v %v %v", esc, ok, err)
	}
}
