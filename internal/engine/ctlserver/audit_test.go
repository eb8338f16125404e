package ctlserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// TestAuditOverSocket serves a real state store through the audit
// handlers and reads it back in pages small enough for the message limit.
func TestAuditOverSocket(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 1300
	// Concurrent appends share commits (the store's group commit).
	var wg sync.WaitGroup
	for g := 0; g < 10; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 10 {
				e := audit.Entry{Kind: audit.KindPolicyChange, Profile: "claude", Fields: map[string]string{"i": fmt.Sprint(i)}}
				if i%100 == 0 {
					// Big entries force pages cut by size, not by count.
					e.Fields["blob"] = strings.Repeat("x", 120_000)
				}
				if _, err := st.AppendAudit(context.Background(), e); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s, path := startServer(t, os.Getuid())
	for typ, h := range AuditHandlers(st) {
		s.Handle(typ, h)
	}
	c := ctl.NewClient(nil)
	if err := c.Connect(ctx(t), path, ctl.Hello{}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	for _, tc := range []struct {
		name        string
		f           audit.Filter
		first, last uint64
	}{
		{"all", audit.Filter{}, 1, n},
		{"after", audit.Filter{AfterSeq: 200}, 201, n},
		{"last", audit.Filter{Last: 1100}, n - 1099, n},
		{"limit", audit.Filter{Limit: 1050, AfterSeq: 10}, 11, 1060},
	} {
		var got []audit.Entry
		pages := 0
		err := c.QueryAudit(ctx(t), tc.f, func(p []audit.Entry) error { pages++; got = append(got, p...); return nil })
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if uint64(len(got)) != tc.last-tc.first+1 || got[0].Seq != tc.first || got[len(got)-1].Seq != tc.last {
			t.Fatalf("%s: %d entries %d..%d", tc.name, len(got), got[0].Seq, got[len(got)-1].Seq)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Seq != got[i-1].Seq+1 {
				t.Fatalf("%s: gap after %d", tc.name, got[i-1].Seq)
			}
		}
		if pages < 2 {
			t.Fatalf("%s: one page: the paging was not exercised", tc.name)
		}
	}
	r, err := c.VerifyAudit(ctx(t))
	if err != nil || !r.OK() || r.Entries != n {
		t.Fatalf("verify: %+v %v", r, err)
	}
}

func TestAuditPolicyChange(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, path := startServer(t, os.Getuid())
	for typ, h := range AuditHandlers(st) {
		s.Handle(typ, h)
	}
	c := ctl.NewClient(nil)
	if err := c.Connect(ctx(t), path, ctl.Hello{}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seq, err := c.RecordPolicyChange(ctx(t), ctl.PolicyChange{Action: "net allow", Fields: map[string]string{"target": "192.0.2.0/24", "action": "forged"}})
	if err != nil || seq != 1 {
		t.Fatalf("record: %d %v", seq, err)
	}
	if _, err := c.RecordPolicyChange(ctx(t), ctl.PolicyChange{}); !errors.Is(err, ctl.ErrBadRequest) {
		t.Fatalf("empty action: %v", err)
	}
	es, err := st.Audit(ctx(t), audit.Filter{})
	if err != nil || len(es) != 1 || es[0].Kind != audit.KindPolicyChange || es[0].Fields["action"] != "net allow" || es[0].Fields["target"] != "192.0.2.0/24" {
		t.Fatalf("entries: %+v %v", es, err)
	}
}
