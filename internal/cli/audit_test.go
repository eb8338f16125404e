package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
	"github.com/lazaret-dev/lazaret/internal/engine/store/storetest"
)

// auditEnv is a config with its own data_root, a runtime dir and a
// workspace that is the current directory.
type auditEnv struct {
	t      *testing.T
	config string
	db     string // the domain's state.db
	socket string // the domain's control socket
}

func newAuditEnv(t *testing.T) *auditEnv {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	for _, d := range []string{ws, filepath.Join(root, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(root, "run"))
	t.Chdir(ws)
	e := &auditEnv{t: t, config: filepath.Join(root, "config.toml")}
	if err := os.WriteFile(e.config, []byte(fmt.Sprintf("data_root = %q\n", filepath.Join(root, "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code := e.run("domain", "--json")
	if code != 0 {
		t.Fatalf("domain: %s", out)
	}
	var d domainJSON
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	e.db, e.socket = d.Resources["state_db"], d.Resources["control_socket"]
	return e
}

func (e *auditEnv) run(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(append([]string{"lazaret", "--config", e.config}, args...), IO{In: strings.NewReader(""), Out: &out, ErrOut: &errb})
	return out.String(), errb.String(), code
}

// fill appends n entries, one of them with hostile characters.
func (e *auditEnv) fill(n int) {
	st, err := store.Open(context.Background(), e.db, store.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	defer st.Close()
	for i := 1; i <= n; i++ {
		en := audit.Entry{Kind: audit.KindSandboxStart, Profile: "default", Fields: map[string]string{"i": fmt.Sprint(i)}}
		if i == 2 {
			en = audit.Entry{Kind: audit.KindEscalationRequest, Profile: "default", Session: "s1",
				Request: &audit.Request{RequestID: "r1", Argv: []string{"ls", "\x1b[2J"}, Justification: "innocent \u202etxt.exe"}}
		}
		if _, err := st.AppendAudit(context.Background(), en); err != nil {
			e.t.Fatal(err)
		}
	}
}

func hasHidden(s string) bool {
	for _, r := range s {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && audit.Escape(string(r)) != string(r)) {
			return true
		}
	}
	return false
}

func TestAuditNoTrailCreatesNothing(t *testing.T) {
	e := newAuditEnv(t)
	out, errOut, code := e.run("audit")
	if code != 0 || out != "" || !strings.Contains(errOut, "no audit trail yet") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, _, code := e.run("audit", "verify"); code != 0 || !strings.Contains(out, "nothing to verify") {
		t.Fatalf("verify: %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Dir(e.db)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("domain root created by a read: %v", err)
	}
}

func TestAuditShowsEscapedEntries(t *testing.T) {
	e := newAuditEnv(t)
	e.fill(5)
	out, errOut, code := e.run("audit")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if lines := strings.Count(out, "\n"); lines != 5 {
		t.Fatalf("%d lines:\n%s", lines, out)
	}
	if hasHidden(out) || !strings.Contains(out, `\x1b[2J`) || !strings.Contains(out, `\u202e`) {
		t.Fatalf("not escaped:\n%q", out)
	}

	out, _, code = e.run("audit", "--json", "--last", "4", "--kind", "escalation.request,sandbox.start")
	if code != 0 || hasHidden(out) {
		t.Fatalf("json: %d %q", code, out)
	}
	var seqs []uint64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var en audit.Entry
		if err := json.Unmarshal([]byte(line), &en); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		seqs = append(seqs, en.Seq)
		if en.Seq == 2 && en.Request.Justification != "innocent \u202etxt.exe" {
			t.Fatalf("JSON changed the value: %q", en.Request.Justification)
		}
	}
	if fmt.Sprint(seqs) != "[2 3 4 5]" {
		t.Fatalf("seqs %v", seqs)
	}
	if out, _, _ := e.run("audit", "--since", "1h"); strings.Count(out, "\n") != 5 {
		t.Fatalf("--since 1h: %q", out)
	}
	if out, _, _ := e.run("audit", "--since", time.Now().Add(time.Hour).Format(time.RFC3339)); out != "" {
		t.Fatalf("--since future: %q", out)
	}
	for _, bad := range [][]string{{"--since", "yesterday"}, {"--kind", "nope"}, {"--last", "-1"}} {
		if _, errOut, code := e.run(append([]string{"audit"}, bad...)...); code != exitUsage || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: exit %d %q", bad, code, errOut)
		}
	}
}

func TestAuditVerifyAndExport(t *testing.T) {
	e := newAuditEnv(t)
	e.fill(6)
	out, errOut, code := e.run("audit", "verify")
	if code != 0 || !strings.Contains(out, "audit trail verified: 6 entries") {
		t.Fatalf("verify: %d %q %q", code, out, errOut)
	}

	out, errOut, code = e.run("audit", "export", "--json")
	if code != 0 || hasHidden(out) {
		t.Fatalf("export: %d %q", code, errOut)
	}
	var doc struct {
		exportHeader
		Entries []audit.Entry `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("export is not JSON: %v\n%s", err, out)
	}
	if doc.Format != exportFormat || !doc.Verification.OK() || len(doc.Entries) != 6 {
		t.Fatalf("export: %+v", doc.exportHeader)
	}
	if r := verifyExport(doc.Entries, &doc.Verification.Head); !r.OK() {
		t.Fatalf("the export does not verify on its own: %v", r.Problem)
	}
	if _, _, code := e.run("audit", "export"); code != exitUsage {
		t.Fatalf("export without --json: exit %d", code)
	}

	if err := storetest.EditEntry(e.db, 3, false, func(en *audit.Entry) { en.Fields["i"] = "forged" }); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = e.run("audit", "verify")
	if code != exitSecurity || !strings.Contains(errOut, "audit entry 3: content does not match its hash") {
		t.Fatalf("tampered verify: %d %q %q", code, out, errOut)
	}
	out, _, code = e.run("audit", "verify", "--json")
	var r audit.Report
	if code != exitSecurity || json.Unmarshal([]byte(out), &r) != nil || r.Problem == nil || r.Problem.Seq != 3 {
		t.Fatalf("tampered verify --json: %d %q", code, out)
	}
	// The export still carries every entry, and says it does not verify.
	out, _, code = e.run("audit", "export", "--json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitSecurity || len(doc.Entries) != 6 || doc.Verification.Problem.Seq != 3 {
		t.Fatalf("tampered export: %d %v", code, err)
	}
}

// TestAuditThroughControlSocket holds the store the way a coordinator does
// and serves it on the domain's control socket: a direct open is refused
// with the holder's pid, and `lazaret audit` still answers, through the
// socket.
func TestAuditThroughControlSocket(t *testing.T) {
	e := newAuditEnv(t)
	e.fill(3)
	st, err := store.Open(context.Background(), e.db, store.Options{Role: "coordinator"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	_, err = store.Open(context.Background(), e.db, store.Options{Timeout: 100 * time.Millisecond})
	want := fmt.Sprintf("state store %s is in use by coordinator pid %d", e.db, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second opener: %v, want %q", err, want)
	}

	// Positive control: without the socket, the CLI cannot read it.
	defer func(d, r time.Duration) { auditStoreTimeout, auditRetryFor = d, r }(auditStoreTimeout, auditRetryFor)
	auditStoreTimeout, auditRetryFor = 100*time.Millisecond, 300*time.Millisecond
	if _, errOut, code := e.run("audit"); code == 0 || !strings.Contains(errOut, "in use by coordinator pid") {
		t.Fatalf("without the socket: %d %q", code, errOut)
	}

	ln, err := ctlserver.Listen(e.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := ctlserver.NewServer(os.Getuid(), nil)
	for typ, h := range ctlserver.AuditHandlers(st) {
		srv.Handle(typ, h)
	}
	go srv.Serve(ln)
	defer srv.Close()
	out, errOut, code := e.run("audit", "--json")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("through the socket: %d %q %q", code, out, errOut)
	}
	if out, _, code := e.run("audit", "verify"); code != 0 || !strings.Contains(out, "3 entries") {
		t.Fatalf("verify through the socket: %d %q", code, out)
	}
	// And new entries appear there at once.
	if _, err := st.AppendAudit(context.Background(), audit.Entry{Kind: audit.KindSessionStart, Session: "x"}); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := e.run("audit", "--last", "1"); !strings.Contains(out, "session.start") {
		t.Fatalf("last: %q", out)
	}
}

func TestAuditFollowDoesNotHoldTheLock(t *testing.T) {
	t.Run("text", func(t *testing.T) { testAuditFollow(t) })
	t.Run("json", func(t *testing.T) { testAuditFollow(t, "--json") })
}

func testAuditFollow(t *testing.T, flags ...string) {
	e := newAuditEnv(t)
	e.fill(2)
	defer func(f time.Duration) { auditFollowEvery = f }(auditFollowEvery)
	auditFollowEvery = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int)
	go func() {
		g := &globalOptions{io: IO{In: strings.NewReader(""), Out: &out, ErrOut: &out}}
		root := newRootCmd(g)
		root.SetArgs(append([]string{"--config", e.config, "audit", "--follow"}, flags...))
		done <- exitCode(root.ExecuteContext(ctx), &out)
	}()
	// A writer (as a coordinator would) gets the lock between polls and
	// its entries show up.
	for i := 0; i < 3; i++ {
		st, err := store.Open(context.Background(), e.db, store.Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendAudit(context.Background(), audit.Entry{Kind: audit.KindSessionEnd, Session: fmt.Sprint("follow-", i)}); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	for give := time.Now().Add(time.Minute); !strings.Contains(out.String(), "follow-2"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(give) {
			cancel()
			t.Fatalf("new entries not shown:\n%s", out.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if n := strings.Count(out.String(), "\n"); n != 5 {
		t.Fatalf("%d lines (duplicates or losses):\n%s", n, out.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// verifyExport checks an export's chain on its own, without the database:
// each entry is encoded again canonically and the chain verified.
func verifyExport(entries []audit.Entry, head *audit.Head) audit.Report {
	v := audit.NewVerifier()
	for _, e := range entries {
		body, err := e.Canonical()
		if err != nil || !v.Add(e.Seq, audit.EncodeRecord(e.Hash, body)) {
			break
		}
	}
	return v.Finish(head)
}
