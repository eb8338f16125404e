package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

func openT(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// entryOf returns a valid entry of kind k.
func entryOf(k audit.Kind, profile string, i int) audit.Entry {
	e := audit.Entry{Kind: k, Profile: profile, Session: fmt.Sprintf("sess-%d", i%3)}
	req := &audit.Request{RequestID: fmt.Sprintf("req-%d", i), Argv: []string{"make", "test"}, Justification: "run tests"}
	switch k {
	case audit.KindEscalationRequest:
		e.Request = req
	case audit.KindEscalationRejected:
		e.Request, e.Rejection = req, &audit.Rejection{Stage: "replay", Reason: "nonce seen"}
	case audit.KindEscalationDecision:
		e.Request, e.Decision = req, &audit.Decision{Outcome: audit.OutcomeEdited, Argv: []string{"make", "test", "-j1"}}
	case audit.KindEscalationResult:
		e.Request, e.Result = req, &audit.Result{ExitCode: 1, DurationMS: 20, StdoutBytes: 5, StdoutSHA256: audit.Sum([]byte("hello"))}
	default:
		e.Fields = map[string]string{"container": "lazaret-" + profile + "-abc", "n": fmt.Sprint(i)}
	}
	return e
}

func appendN(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		k := audit.Kinds[i%len(audit.Kinds)]
		if _, err := s.AppendAudit(context.Background(), entryOf(k, "claude", i)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAppendQueryVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d", "state.db")
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	clock := base
	s := openT(t, path, Options{Now: func() time.Time { clock = clock.Add(time.Minute); return clock }})
	ctx := context.Background()
	for i, k := range audit.Kinds {
		profile := "claude"
		if i%2 == 1 {
			profile = "codex"
		}
		seq, err := s.AppendAudit(ctx, entryOf(k, profile, i))
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i+1) {
			t.Fatalf("seq %d, want %d", seq, i+1)
		}
	}
	if _, err := s.AppendAudit(ctx, audit.Entry{Kind: audit.KindEscalationResult}); err == nil {
		t.Fatal("invalid entry accepted")
	}
	all, err := s.Audit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(audit.Kinds) {
		t.Fatalf("%d entries", len(all))
	}
	prev := audit.GenesisPrev
	for i, e := range all {
		if e.Seq != uint64(i+1) || e.Prev != prev || e.Kind != audit.Kinds[i] {
			t.Fatalf("entry %d: %+v", i, e)
		}
		prev = e.Hash
	}
	for _, c := range []struct {
		name string
		f    audit.Filter
		want []uint64
	}{
		{"profile", audit.Filter{Profile: "codex"}, []uint64{2, 4, 6, 8}},
		{"since", audit.Filter{Since: base.Add(8 * time.Minute)}, []uint64{8, 9}},
		{"after", audit.Filter{AfterSeq: 7}, []uint64{8, 9}},
		{"kinds", audit.Filter{Kinds: []audit.Kind{audit.KindSandboxStart, audit.KindSessionEnd}}, []uint64{5, 9}},
		{"last", audit.Filter{Last: 3}, []uint64{7, 8, 9}},
		{"last of profile", audit.Filter{Last: 2, Profile: "claude"}, []uint64{7, 9}},
		{"last after", audit.Filter{Last: 5, AfterSeq: 7}, []uint64{8, 9}},
		{"limit", audit.Filter{Limit: 2, AfterSeq: 3}, []uint64{4, 5}},
		{"limit of profile", audit.Filter{Limit: 2, Profile: "codex"}, []uint64{2, 4}},
	} {
		got, err := s.Audit(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, e := range got {
			seqs = append(seqs, e.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, seqs, c.want)
		}
		// AuditJSON selects the same entries and decodes to the same.
		raw, err := s.AuditJSON(ctx, c.f)
		if err != nil || len(raw) != len(got) {
			t.Fatalf("%s: AuditJSON: %d entries, %v", c.name, len(raw), err)
		}
		for i, r := range raw {
			var e audit.Entry
			if err := json.Unmarshal(r, &e); err != nil || !reflect.DeepEqual(e, got[i]) {
				t.Fatalf("%s: AuditJSON entry %d: %v\n%s\n%+v", c.name, i, err, r, got[i])
			}
		}
	}
	r, err := s.Verify(ctx)
	if err != nil || !r.OK() || r.Entries != uint64(len(audit.Kinds)) || r.Head.Hash != all[len(all)-1].Hash {
		t.Fatalf("verify: %+v %v", r, err)
	}

	// Sessions and escalations round-trip and survive a reopen.
	code := 3
	if err := s.RecordSession(ctx, Session{ID: "s1", Profile: "claude", Start: base, End: base.Add(time.Hour), Exit: 137, ExitSignal: "SIGKILL"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordEscalation(ctx, Escalation{RequestID: "r1", Profile: "claude", Argv: []string{"ls"}, Outcome: "approved", ExitCode: &code, AuditSeqs: []uint64{1, 3, 4}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Audit(ctx, audit.Filter{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := os.Stat(ownerPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("owner record left after close: %v", err)
	}
	s = openT(t, path, Options{})
	sessions, err := s.Sessions(ctx, 0)
	if err != nil || len(sessions) != 1 || sessions[0].ExitSignal != "SIGKILL" || !sessions[0].End.Equal(base.Add(time.Hour)) {
		t.Fatalf("sessions: %+v %v", sessions, err)
	}
	esc, ok, err := s.Escalation(ctx, "r1")
	if err != nil || !ok || *esc.ExitCode != 3 || esc.Outcome != "approved" {
		t.Fatalf("escalation: %+v %v %v", esc, ok, err)
	}
	if _, ok, _ := s.Escalation(ctx, "nope"); ok {
		t.Fatal("unknown escalation found")
	}
	if r, _ := s.Verify(ctx); !r.OK() {
		t.Fatalf("verify after reopen: %v", r.Problem)
	}
}

func TestVerifyNamesFirstBadEntry(t *testing.T) {
	cases := []struct {
		name    string
		tamper  func(t *testing.T, path string)
		seq     uint64
		because string
	}{
		{"none", func(*testing.T, string) {}, 0, ""}, // control: the same file untouched verifies
		{"edit", func(t *testing.T, p string) { tamperEdit(t, p, 4, false) }, 4, "edited"},
		{"edit and rehash", func(t *testing.T, p string) { tamperEdit(t, p, 4, true) }, 5, "prev does not match the hash of entry 4"},
		{"edit first", func(t *testing.T, p string) { tamperEdit(t, p, 1, false) }, 1, "edited"},
		{"edit last and rehash", func(t *testing.T, p string) { tamperEdit(t, p, 10, true) }, 10, "chain head"},
		{"delete", func(t *testing.T, p string) { tamperDelete(t, p, 6) }, 6, "deleted"},
		{"delete first", func(t *testing.T, p string) { tamperDelete(t, p, 1) }, 1, "deleted"},
		{"delete last", func(t *testing.T, p string) { tamperDelete(t, p, 10) }, 10, "deleted from the end"},
		{"reorder", func(t *testing.T, p string) { tamperSwap(t, p, 3, 7) }, 3, "reordered"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s := openT(t, path, Options{})
			appendN(t, s, 10)
			s.Close()
			c.tamper(t, path)
			s = openT(t, path, Options{})
			r, err := s.Verify(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if c.seq == 0 {
				if !r.OK() || r.Entries != 10 {
					t.Fatalf("untouched file: %+v", r)
				}
				return
			}
			if r.OK() {
				t.Fatal("tampered chain verified")
			}
			if r.Problem.Seq != c.seq || !strings.Contains(r.Problem.Reason, c.because) {
				t.Fatalf("got %v, want entry %d (%s)", r.Problem, c.seq, c.because)
			}
		})
	}
}

func TestSecondOpenerInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openT(t, path, Options{Role: "coordinator"})
	_, err := Open(context.Background(), path, Options{Timeout: 100 * time.Millisecond, Role: "lazaret audit"})
	var iu *InUseError
	if !errors.As(err, &iu) {
		t.Fatalf("second open: %v", err)
	}
	want := fmt.Sprintf("state store %s is in use by coordinator pid %d", path, os.Getpid())
	if err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	// A context deadline shorter than the timeout bounds the wait too.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Open(ctx, path, Options{Timeout: time.Hour}); !errors.As(err, &iu) {
		t.Fatalf("open with deadline: %v", err)
	}
	// The holder keeps working.
	if _, err := s.AppendAudit(context.Background(), entryOf(audit.KindSessionStart, "claude", 1)); err != nil {
		t.Fatal(err)
	}

	// A stale owner record (dead pid) is not believed: the holder is
	// found in /proc/locks instead.
	if err := os.WriteFile(ownerPath(path), []byte("pid 999999999\nstart 1\nrole coordinator\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), path, Options{Timeout: 50 * time.Millisecond})
	if !errors.As(err, &iu) || iu.PID != os.Getpid() || iu.Role != "" {
		t.Fatalf("with stale owner record: %v (%+v)", err, iu)
	}
	s.Close()
	// Once closed, the lock is free.
	s2 := openT(t, path, Options{Timeout: 50 * time.Millisecond})
	s2.Close()
}

func TestOwnerRecordStaleAfterExit(t *testing.T) {
	// A record naming a live pid with another start time (pid reused) is
	// stale too.
	o := owner{PID: os.Getpid(), Start: 1}
	if o.alive() {
		t.Fatal("reused pid taken as alive")
	}
	start, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !(owner{PID: os.Getpid(), Start: start}).alive() {
		t.Fatal("own process not alive")
	}
}

func TestCorruptFileMovedAside(t *testing.T) {
	for _, c := range []struct {
		name    string
		content func(t *testing.T) []byte
	}{
		{"garbage", func(*testing.T) []byte { return bytes.Repeat([]byte("not a bbolt file\x00\xff"), 4096) }},
		{"short", func(*testing.T) []byte { return []byte("x") }},
		{"damaged pages", func(t *testing.T) []byte {
			// A real store whose meta pages are intact but whose other
			// pages are overwritten.
			p := filepath.Join(t.TempDir(), "state.db")
			s := openT(t, p, Options{})
			appendN(t, s, 50)
			s.Close()
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			ps := os.Getpagesize()
			for i := 2 * ps; i < len(b); i++ {
				b[i] = byte(i * 7)
			}
			return b
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.db")
			orig := c.content(t)
			if err := os.WriteFile(path, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			s := openT(t, path, Options{})
			rec := s.Recovered()
			if rec == nil {
				t.Fatal("corrupt file not reported")
			}
			if !strings.HasPrefix(rec.MovedTo, path+".corrupt-") || !strings.Contains(rec.Error(), "moved aside to "+rec.MovedTo) {
				t.Fatalf("recovered: %v", rec)
			}
			kept, err := os.ReadFile(rec.MovedTo)
			if err != nil || !bytes.Equal(kept, orig) {
				t.Fatalf("old file not kept intact: %v", err)
			}
			appendN(t, s, 3)
			if r, err := s.Verify(context.Background()); err != nil || !r.OK() || r.Entries != 3 {
				t.Fatalf("new store: %+v %v", r, err)
			}
		})
	}
}

func TestCorruptCopiesNeverOverwritten(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	for i := 0; i < 3; i++ {
		if err := os.WriteFile(path, []byte(fmt.Sprintf("garbage %d", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		s := openT(t, path, Options{})
		if s.Recovered() == nil {
			t.Fatal("not recovered")
		}
		s.Close()
		os.Remove(path)
	}
	m, _ := filepath.Glob(path + ".corrupt-*")
	if len(m) != 3 {
		t.Fatalf("corrupt copies: %v", m)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openT(t, path, Options{})
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error { return putSchemaVersion(tx, SchemaVersion+1) })
	before, _ := os.ReadFile(path)
	_, err := Open(context.Background(), path, Options{})
	var se *SchemaError
	if !errors.As(err, &se) || se.Version != SchemaVersion+1 {
		t.Fatalf("open: %v", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("file changed")
	}
}

func TestQueueFullIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openT(t, path, Options{QueueSize: 1, EnqueueTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	block, started := make(chan struct{}), make(chan struct{})
	go s.read(ctx, func(*bolt.Tx) error { close(started); <-block; return nil })
	<-started
	// One call fills the queue...
	queued := make(chan error, 1)
	go func() { _, err := s.AppendAudit(ctx, entryOf(audit.KindSessionStart, "p", 1)); queued <- err }()
	for len(s.q) == 0 {
		time.Sleep(time.Millisecond)
	}
	// ...so the next gives up: at EnqueueTimeout without a deadline,
	// at the deadline with one.
	if _, err := s.AppendAudit(ctx, entryOf(audit.KindSessionStart, "p", 2)); !errors.Is(err, ErrBusy) {
		t.Fatalf("full queue: %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.Audit(dctx, audit.Filter{}); !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("full queue with deadline: %v", err)
	}
	// A caller that stops waiting for a queued call returns at once.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := s.Verify(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	close(block)
	if err := <-queued; err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Verify(ctx); r.Entries != 1 {
		t.Fatalf("entries %d", r.Entries)
	}
}

func TestFailedWriteInBatchIsIsolated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openT(t, path, Options{})
	ctx := context.Background()
	block, started := make(chan struct{}), make(chan struct{})
	go s.read(ctx, func(*bolt.Tx) error { close(started); <-block; return nil })
	<-started
	var wg sync.WaitGroup
	errs := make([]error, 6)
	boom := errors.New("boom")
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 3 {
				errs[i] = s.write(ctx, func(tx *bolt.Tx) error {
					tx.Bucket(bucketMeta).Put([]byte("junk"), []byte("x"))
					return boom
				})
				return
			}
			_, errs[i] = s.AppendAudit(ctx, entryOf(audit.KindSessionEnd, "p", i))
		}()
	}
	for len(s.q) < len(errs) {
		time.Sleep(time.Millisecond)
	}
	close(block)
	wg.Wait()
	for i, err := range errs {
		if (i == 3) != errors.Is(err, boom) {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	r, _ := s.Verify(ctx)
	if !r.OK() || r.Entries != 5 {
		t.Fatalf("verify: %+v", r)
	}
	s.read(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get([]byte("junk")) != nil {
			t.Error("failed op's write committed")
		}
		return nil
	})
}

func TestConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openT(t, path, Options{NoSync: true})
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[uint64]bool{}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				seq, err := s.AppendAudit(ctx, entryOf(audit.KindSessionStart, fmt.Sprint("p", g), i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[seq] = true
				mu.Unlock()
				if i%10 == 0 {
					if _, err := s.Audit(ctx, audit.Filter{Last: 5}); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != 320 {
		t.Fatalf("%d distinct seqs", len(seen))
	}
	if r, _ := s.Verify(ctx); !r.OK() || r.Entries != 320 {
		t.Fatalf("verify: %+v", r)
	}
	// Calls racing with Close get a result or ErrClosed, never hang.
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := s.AppendAudit(ctx, entryOf(audit.KindSessionStart, "late", g))
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func TestEscalationStateFollowsTheTrail(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "state.db"), Options{})
	ctx := context.Background()
	req := &audit.Request{RequestID: "r1", Argv: []string{"make", "lint"}, Cwd: "/workspace", Justification: "lint"}
	for _, e := range []audit.Entry{
		{Kind: audit.KindEscalationRejected, Request: &audit.Request{RequestID: "r0"}, Rejection: &audit.Rejection{Stage: "signature"}},
		{Kind: audit.KindEscalationRequest, Profile: "claude", Session: "s1", Request: req},
		{Kind: audit.KindEscalationDecision, Request: &audit.Request{RequestID: "r1"}, Decision: &audit.Decision{Outcome: audit.OutcomeEdited, Argv: []string{"make", "lint", "-k"}}},
		{Kind: audit.KindEscalationResult, Request: &audit.Request{RequestID: "r1"}, Result: &audit.Result{ExitCode: 2}},
	} {
		if _, err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := s.Escalation(ctx, "r0"); ok {
		t.Fatal("a rejected request was recorded as verified")
	}
	esc, ok, err := s.Escalation(ctx, "r1")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if esc.Profile != "claude" || esc.SessionID != "s1" || esc.Justification != "lint" || esc.Outcome != "edited" ||
		fmt.Sprint(esc.RunArgv) != "[make lint -k]" || esc.ExitCode == nil || *esc.ExitCode != 2 || esc.Finished.IsZero() ||
		fmt.Sprint(esc.AuditSeqs) != "[2 3 4]" {
		t.Fatalf("escalation state: %+v", esc)
	}
}
