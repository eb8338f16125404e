//go:build bench

// Package store benchmarks the state store: audit append throughput with
// fsync on (one writer, and many writers sharing commits), against the
// disk's own fsync floor (append one line to a file and fdatasync it), and
// query latency on a trail of 100,000 entries, directly and through the
// control socket; with LAZARET_BIN set, also `lazaret audit` as a process,
// through a real coordinator and, after it stops, directly. Run by `make
// bench` (scripts/bench); prints a markdown table for docs/PERFORMANCE.md
// ("State store").
package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

const (
	bigTrail = 100_000
	rounds   = 7
)

// rows collects the table printed at the end.
var (
	rowsMu sync.Mutex
	rows   []string
)

func row(format string, args ...any) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	rows = append(rows, fmt.Sprintf(format, args...))
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bigPath != "" {
		os.RemoveAll(filepath.Dir(bigPath))
	}
	if len(rows) > 0 {
		fmt.Println("\n| measurement | value |\n|---|---|")
		for _, r := range rows {
			fmt.Println(r)
		}
	}
	os.Exit(code)
}

// entry is a realistic escalation entry (about 500 bytes encoded).
func entry(i int) audit.Entry {
	kinds := []audit.Kind{audit.KindEscalationRequest, audit.KindEscalationDecision, audit.KindEscalationResult, audit.KindSessionStart}
	e := audit.Entry{Kind: kinds[i%len(kinds)], Profile: "claude", Session: "0123456789abcdef0123456789abcdef",
		Request: &audit.Request{RequestID: fmt.Sprintf("req-%08d", i), Argv: []string{"cargo", "test", "--workspace", "--", "--nocapture"},
			Cwd: "/workspace/crates/core", Justification: "run the test suite on the host where the GPU is"}}
	switch e.Kind {
	case audit.KindEscalationDecision:
		e.Decision = &audit.Decision{Outcome: audit.OutcomeAuto, Rule: "cargo test"}
	case audit.KindEscalationResult:
		e.Result = &audit.Result{ExitCode: 0, DurationMS: 12345, StdoutBytes: 48213, StdoutSHA256: strings.Repeat("ab", 32), StderrSHA256: strings.Repeat("cd", 32)}
	case audit.KindSessionStart:
		e.Request, e.Fields = nil, map[string]string{"pid": "4242", "tty": "true", "command": "claude"}
	}
	return e
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func timeIt(n int, f func() error) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return median(ds), nil
}

func open(b *testing.B, path string, noSync bool) *store.Store {
	b.Helper()
	st, err := store.Open(context.Background(), path, store.Options{NoSync: noSync, QueueSize: 1024})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// appendAll appends n entries from writers goroutines and returns the
// elapsed time.
func appendAll(b *testing.B, st *store.Store, n, writers int) time.Duration {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += writers {
				if _, err := st.AppendAudit(ctx, entry(i)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(t0)
}

// BenchmarkFsyncFloor is the disk's cost of one durable append outside
// bbolt: write a line, fdatasync.
func BenchmarkFsyncFloor(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	line := []byte(strings.Repeat("x", 499) + "\n")
	const n = 500
	for b.Loop() {
		d, err := timeIt(1, func() error {
			for i := 0; i < n; i++ {
				if _, err := f.Write(line); err != nil {
					return err
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n)/d.Seconds(), "appends/s")
		row("| fsync floor: append 500 B + fdatasync to a plain file | %.0f /s (%.2f ms each) |", float64(n)/d.Seconds(), d.Seconds()*1000/n)
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct{ writers, n int }{{1, 500}, {16, 2000}} {
		writers, n := c.writers, c.n
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			for b.Loop() {
				st := open(b, filepath.Join(b.TempDir(), "state.db"), false)
				d := appendAll(b, st, n, writers)
				st.Close()
				b.ReportMetric(float64(n)/d.Seconds(), "entries/s")
				row("| audit append, fsync on, %d writer(s), %d entries | %.0f entries/s (%.2f ms per entry) |", writers, n, float64(n)/d.Seconds(), d.Seconds()*1000/float64(n))
			}
		})
	}
}

// bigStore builds a trail of bigTrail entries once (fsync off while
// filling: what is measured is reading it).
var (
	bigOnce sync.Once
	bigPath string
)

func bigStore(b *testing.B) string {
	bigOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lazaret-bench-store-")
		if err != nil {
			b.Fatal(err)
		}
		bigPath = filepath.Join(dir, "state.db")
		st := open(b, bigPath, true)
		d := appendAll(b, st, bigTrail, 32)
		st.Close()
		fi, _ := os.Stat(bigPath)
		row("| building a %d-entry trail (fsync off, 32 writers) | %.1f s, file %.1f MB |", bigTrail, d.Seconds(), float64(fi.Size())/1e6)
	})
	return bigPath
}

func BenchmarkQuery100k(b *testing.B) {
	path := bigStore(b)
	ctx := context.Background()
	for b.Loop() {
		var st *store.Store
		dOpen, err := timeIt(rounds, func() error {
			var err error
			st, err = store.Open(ctx, path, store.Options{})
			if err != nil {
				return err
			}
			return st.Close()
		})
		if err != nil {
			b.Fatal(err)
		}
		row("| open + close a %d-entry store (lock, checks, owner record) | %s |", bigTrail, dOpen.Round(time.Microsecond))
		dCheck, err := timeIt(3, func() error {
			st, err := store.Open(ctx, path, store.Options{Check: true})
			if err != nil {
				return err
			}
			return st.Close()
		})
		if err != nil {
			b.Fatal(err)
		}
		row("| open + close with bbolt's full consistency check (coordinator start) | %s |", dCheck.Round(time.Millisecond))
		st = open(b, path, false)
		since := time.Now().Add(-time.Hour)
		for _, q := range []struct {
			name string
			f    audit.Filter
		}{
			{"last 100 entries", audit.Filter{Last: 100}},
			{"last 100 of a kind", audit.Filter{Last: 100, Kinds: []audit.Kind{audit.KindEscalationResult}}},
			{"entries after the last-but-100 seq (--follow poll)", audit.Filter{AfterSeq: bigTrail - 100}},
			{"--since 1h (decodes all; all match)", audit.Filter{Since: since}},
		} {
			var n int
			d, err := timeIt(rounds, func() error {
				es, err := st.Audit(ctx, q.f)
				n = len(es)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			row("| direct query, %s (%d returned) | %s |", q.name, n, d.Round(time.Microsecond))
		}
		nj := 0
		dj, err := timeIt(3, func() error {
			raw, err := st.AuditJSON(ctx, audit.Filter{})
			nj = len(raw)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		row("| direct query, all entries as JSON (AuditJSON, no decoding; %d returned) | %s |", nj, dj.Round(time.Millisecond))
		d, err := timeIt(3, func() error {
			r, err := st.Verify(ctx)
			if err == nil && !r.OK() {
				err = r.Problem
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		row("| verify the whole %d-entry chain | %s |", bigTrail, d.Round(time.Millisecond))

		// The same queries over a real control socket (what a
		// coordinator serves): handler, paging, JSON both ways.
		sock := filepath.Join(b.TempDir(), "c.sock")
		ln, err := ctlserver.Listen(sock)
		if err != nil {
			b.Fatal(err)
		}
		srv := ctlserver.NewServer(os.Getuid(), nil)
		for typ, h := range ctlserver.AuditHandlers(st) {
			srv.Handle(typ, h)
		}
		go srv.Serve(ln)
		c := ctl.NewClient(nil)
		if err := c.Connect(ctx, sock, ctl.Hello{}); err != nil {
			b.Fatal(err)
		}
		for _, q := range []struct {
			name string
			f    audit.Filter
		}{
			{"last 100 entries", audit.Filter{Last: 100}},
			{"all 100,000 entries (export)", audit.Filter{}},
		} {
			n := 0
			d, err := timeIt(3, func() error {
				n = 0
				return c.QueryAudit(ctx, q.f, func(p []audit.Entry) error { n += len(p); return nil })
			})
			if err != nil {
				b.Fatal(err)
			}
			row("| control socket query, %s (%d returned, decoded) | %s |", q.name, n, d.Round(time.Microsecond))
		}
		n := 0
		d, err = timeIt(3, func() error {
			n = 0
			return c.QueryAuditJSON(ctx, audit.Filter{}, func(p []json.RawMessage) error { n += len(p); return nil })
		})
		if err != nil {
			b.Fatal(err)
		}
		row("| control socket query, all entries as JSON (what `audit --json` and export use; %d returned) | %s |", n, d.Round(time.Millisecond))
		d, err = timeIt(3, func() error { _, err := c.VerifyAudit(ctx); return err })
		if err != nil {
			b.Fatal(err)
		}
		row("| control socket verify, %d entries | %s |", bigTrail, d.Round(time.Millisecond))
		c.Close()
		srv.Close()
		st.Close()
	}
}

// BenchmarkCLI100k times `lazaret audit` as a process on a 100,000-entry
// trail: through a real coordinator (podman + runsc sandbox running), and
// directly after it stopped.
func BenchmarkCLI100k(b *testing.B) {
	bin := os.Getenv("LAZARET_BIN")
	if bin == "" {
		b.Skip("LAZARET_BIN not set")
	}
	// Not b.TempDir: the domain's State Anchor root is a mode-000 vault
	// holding files of the sandbox's mapped users, which only root of
	// podman's user namespace can remove.
	root, err := os.MkdirTemp("", "lazaret-bench-store-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = exec.Command("podman", "unshare", "rm", "-rf", root).Run() })
	ws := filepath.Join(root, "ws")
	os.MkdirAll(ws, 0o755)
	cfg := filepath.Join(root, "config.toml")
	// The workspace is no repository: direct mode, consented to in the
	// profile (a start without a terminal needs it).
	os.WriteFile(cfg, []byte(fmt.Sprintf("data_root = %q\n\n[profiles.default]\ngit_mode = \"direct\"\n", filepath.Join(root, "data"))), 0o600)
	lz := func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "lazaret"), append([]string{"--config", cfg}, args...)...)
		cmd.Dir = ws
		return cmd
	}
	ctx := context.Background()
	out, err := lz(ctx, "domain", "--json").Output()
	if err != nil {
		b.Fatal(err)
	}
	var dom struct {
		Resources map[string]string `json:"resources"`
	}
	if err := json.Unmarshal(out, &dom); err != nil {
		b.Fatal(err)
	}
	// Seed the domain's store with the 100,000-entry trail.
	src, err := os.ReadFile(bigStore(b))
	if err != nil {
		b.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(dom.Resources["state_db"]), 0o700)
	if err := os.WriteFile(dom.Resources["state_db"], src, 0o600); err != nil {
		b.Fatal(err)
	}
	queries := [][]string{{"audit", "--last", "100"}, {"audit", "--json"}, {"audit", "verify"}}
	measure := func(how string) {
		for _, q := range queries {
			d, err := timeIt(5, func() error {
				cmd := lz(ctx, q...)
				cmd.Stdout = nil
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("%v: %v: %s", q, err, out)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			row("| `lazaret %s`, %s | %s |", strings.Join(q, " "), how, d.Round(time.Millisecond))
		}
	}
	for b.Loop() {
		hctx, cancel := context.WithCancel(ctx)
		holder := lz(hctx, "exec", "--", "sleep", "600")
		if err := holder.Start(); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			o, _ := lz(ctx, "status", "--json").Output()
			if strings.Contains(string(o), `"running": true`) {
				break
			}
			if time.Now().After(deadline) {
				cancel()
				b.Fatal("sandbox did not start")
			}
			time.Sleep(200 * time.Millisecond)
		}
		measure("through the coordinator")
		if out, err := lz(ctx, "stop").CombinedOutput(); err != nil {
			b.Fatalf("stop: %v %s", err, out)
		}
		cancel()
		holder.Wait()
		measure("direct (no coordinator)")
	}
}
