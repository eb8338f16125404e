package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/audit"
	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/ctl"
	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/store"
)

// Timeouts of the audit commands. The store timeout bounds the wait for
// the file lock when no coordinator runs (another `lazaret audit` may hold
// it for a moment).
var (
	auditStoreTimeout = 3 * time.Second
	auditFollowEvery  = time.Second
	// auditRetryFor bounds the retries while a coordinator is starting
	// or stopping (it holds the store but its socket does not answer).
	auditRetryFor = 6 * time.Second
)

// exportFormat names the layout of `lazaret audit export --json`.
const exportFormat = "lazaret.audit-export/1"

type auditOptions struct {
	profile string
	json    bool
	since   string
	follow  bool
	last    int
	kinds   []string
}

func newAuditCmd(g *globalOptions) *cobra.Command {
	o := &auditOptions{}
	cmd := &cobra.Command{
		Use:   "audit [PROFILE]",
		Short: "Show the audit trail of this directory's sandbox (escalations, starts, stops)",
		Long: `Show the tamper-evident audit trail of the Domain Anchor of PROFILE (default
"default") and the current directory: every escalation request (also rejected
ones, with the stage that rejected them), decision and result, sandbox
starts and stops, sessions and policy changes. Control and invisible
characters are shown escaped (\x1b, \u202e).

While the sandbox runs, the query goes through its coordinator, which owns
the state store; otherwise lazaret reads the store itself.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAudit(cmd.Context(), g, o, profileArg(o.profile, args))
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print one JSON object per entry")
	f.StringVar(&o.since, "since", "", "only entries at or after T: an RFC 3339 time, a date (2026-12-02) or a duration ago (2h)")
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing new entries until interrupted")
	f.IntVarP(&o.last, "last", "n", 0, "only the last N matching entries")
	f.StringSliceVar(&o.kinds, "kind", nil, "only entries of these kinds (escalation.request, sandbox.start, ...)")
	cmd.PersistentFlags().StringVarP(&o.profile, "profile", "p", "", "profile (the same as the PROFILE argument)")
	_ = cmd.RegisterFlagCompletionFunc("profile", g.completeProfiles)
	cmd.AddCommand(newAuditVerifyCmd(g, o), newAuditExportCmd(g, o))
	return cmd
}

func newAuditVerifyCmd(g *globalOptions, parent *auditOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [PROFILE]",
		Short: "Check the audit trail's hash chain; name the first edited, deleted or reordered entry",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuditVerify(cmd.Context(), g, profileArg(parent.profile, args), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func newAuditExportCmd(g *globalOptions, parent *auditOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "export --json [PROFILE]",
		Short: "Write the whole audit trail with its hashes as one JSON document, for keeping elsewhere",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !asJSON {
				return usageError{errors.New("audit export: --json is required (the only format)")}
			}
			return runAuditExport(cmd.Context(), g, profileArg(parent.profile, args))
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON document (required)")
	return cmd
}

func profileArg(flag string, args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return flag
}

// parseSince reads --since: an RFC 3339 time, a date (local midnight), or
// a duration meaning that long ago.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, v, time.Local); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usageError{fmt.Errorf("--since %q: want an RFC 3339 time (2026-12-02T10:00:00Z), a date (2026-12-02) or a duration ago (2h)", v)}
}

func (o *auditOptions) filter(now time.Time) (audit.Filter, error) {
	var f audit.Filter
	var err error
	if f.Since, err = parseSince(o.since, now); err != nil {
		return f, err
	}
	if o.last < 0 {
		return f, usageError{fmt.Errorf("--last %d: must not be negative", o.last)}
	}
	f.Last = o.last
	for _, k := range o.kinds {
		if !audit.Kind(k).Known() {
			known := make([]string, len(audit.Kinds))
			for i, x := range audit.Kinds {
				known[i] = string(x)
			}
			return f, usageError{fmt.Errorf("--kind %q: unknown kind (known: %s)", k, strings.Join(known, ", "))}
		}
		f.Kinds = append(f.Kinds, audit.Kind(k))
	}
	return f, nil
}

// auditSource reads the audit trail through the running coordinator, or
// directly from the store when none runs.
type auditSource struct {
	client *ctl.Client
	st     *store.Store
}

// errNoTrail means the domain has no state store yet: nothing was ever
// recorded, and nothing is created just to say so.
var errNoTrail = errors.New("no audit trail")

// openAuditSource connects to the domain's coordinator, or opens the store
// under its lock when none answers. A coordinator that appears meanwhile
// (the store is then "in use by coordinator") is asked instead.
func openAuditSource(ctx context.Context, g *globalOptions, a *domain.Anchor) (*auditSource, error) {
	var lastErr error
	deadline := time.Now().Add(auditRetryFor)
	for attempt := 0; attempt == 0 || time.Now().Before(deadline); attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
		c, err := g.domainClient(a).dial(ctx)
		if err == nil {
			return &auditSource{client: c}, nil
		}
		switch {
		case errors.Is(err, ctl.ErrAPIMismatch):
			return nil, err
		case !errors.Is(err, connect.ErrNotRunning):
			// Shutting down, or its sandbox failed to start: it closes
			// the store as it goes; read the file once it is gone.
			lastErr = err
			continue
		}
		if _, err := os.Stat(a.StateDB()); errors.Is(err, fs.ErrNotExist) {
			return nil, errNoTrail
		}
		st, err := store.Open(ctx, a.StateDB(), store.Options{Role: "lazaret audit", Timeout: auditStoreTimeout, Log: g.log})
		var iu *store.InUseError
		switch {
		case err == nil:
			if rec := st.Recovered(); rec != nil {
				fmt.Fprintf(g.io.ErrOut, "lazaret: warning: %s\n", rec)
			}
			return &auditSource{st: st}, nil
		case errors.As(err, &iu) && iu.Role == "coordinator":
			lastErr = err
			continue
		case errors.As(err, &iu):
			return nil, withHint(err, exitFailure, "another lazaret command is reading the audit trail; retry when it ends")
		}
		return nil, storeHint(err)
	}
	return nil, lastErr
}

// storeHint attaches the user's way out to a state store error.
func storeHint(err error) error {
	var se *store.SchemaError
	var me *store.MigrationError
	switch {
	case errors.As(err, &se):
		return withHint(err, exitSetup, "this state store was written by a newer lazaret; upgrade lazaret")
	case errors.As(err, &me):
		return withHint(err, exitFailure, "the file is unchanged; please report this bug (move the file aside to start a new store)")
	}
	return err
}

func (s *auditSource) Close() {
	if s.client != nil {
		s.client.Close()
	}
	if s.st != nil {
		s.st.Close()
	}
}

// query calls fn with the matching entries, in order, in pages.
func (s *auditSource) query(ctx context.Context, f audit.Filter, fn func([]audit.Entry) error) error {
	if s.client != nil {
		return ctl.QueryAudit(ctx, s.client.Conn, f, fn)
	}
	entries, err := s.st.Audit(ctx, f)
	if err != nil {
		return err
	}
	return fn(entries)
}

// queryJSON is query handing over each entry's JSON object undecoded.
func (s *auditSource) queryJSON(ctx context.Context, f audit.Filter, fn func([]json.RawMessage) error) error {
	if s.client != nil {
		return ctl.QueryAuditJSON(ctx, s.client.Conn, f, fn)
	}
	entries, err := s.st.AuditJSON(ctx, f)
	if err != nil {
		return err
	}
	return fn(entries)
}

func (s *auditSource) verify(ctx context.Context) (audit.Report, error) {
	if s.client != nil {
		return ctl.VerifyAudit(ctx, s.client.Conn)
	}
	return s.st.Verify(ctx)
}

func (g *globalOptions) auditAnchor(profile string) (*domain.Anchor, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	_, a, err := g.resolveDomain(cfg, profile, "")
	return a, err
}

func runAudit(ctx context.Context, g *globalOptions, o *auditOptions, profile string) error {
	f, err := o.filter(time.Now())
	if err != nil {
		return err
	}
	a, err := g.auditAnchor(profile)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(g.io.Out)
	defer w.Flush()
	var lastSeq uint64
	var emit auditEmitter
	if o.json {
		// JSON goes out as the store wrote it, never decoded and
		// encoded again.
		emit = func(ctx context.Context, src *auditSource, f audit.Filter) error {
			return src.queryJSON(ctx, f, func(raw []json.RawMessage) error {
				for _, r := range raw {
					if _, err := fmt.Fprintf(w, "%s\n", audit.EscapeJSON(r)); err != nil {
						return err
					}
				}
				if len(raw) == 0 {
					// A --follow poll that found nothing new.
					return nil
				}
				seq, err := seqOf(raw[len(raw)-1])
				lastSeq = max(lastSeq, seq)
				return err
			})
		}
	} else {
		emit = func(ctx context.Context, src *auditSource, f audit.Filter) error {
			return src.query(ctx, f, func(entries []audit.Entry) error {
				for _, e := range entries {
					if _, err := fmt.Fprintln(w, audit.Line(e)); err != nil {
						return err
					}
					lastSeq = max(lastSeq, e.Seq)
				}
				return nil
			})
		}
	}
	err = withAuditSource(ctx, g, a, func(src *auditSource) error { return emit(ctx, src, f) })
	if errors.Is(err, errNoTrail) {
		if !o.follow {
			if !o.json {
				fmt.Fprintf(g.io.ErrOut, "lazaret: no audit trail yet for profile %s in %s\n", a.Profile, field(a.Workspace))
			}
			return nil
		}
	} else if err != nil {
		return err
	}
	if err := w.Flush(); err != nil || !o.follow {
		return err
	}
	return followAudit(ctx, g, a, f, &lastSeq, w, emit)
}

// auditEmitter runs one query on src and prints what it returns.
type auditEmitter func(ctx context.Context, src *auditSource, f audit.Filter) error

// seqOf reads the sequence number of an entry's JSON.
func seqOf(raw json.RawMessage) (uint64, error) {
	var e struct {
		Seq uint64 `json:"seq"`
	}
	err := json.Unmarshal(raw, &e)
	return e.Seq, err
}

// followAudit polls for entries after lastSeq until ctx ends. With no
// coordinator, each poll opens the store and closes it at once, so
// following never keeps a coordinator from starting.
func followAudit(ctx context.Context, g *globalOptions, a *domain.Anchor, f audit.Filter, lastSeq *uint64, w *bufio.Writer, emit auditEmitter) error {
	f.Last = 0
	t := time.NewTicker(auditFollowEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // interrupting --follow is how it ends
		case <-t.C:
		}
		f.AfterSeq = *lastSeq
		err := withAuditSource(ctx, g, a, func(src *auditSource) error { return emit(ctx, src, f) })
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errNoTrail):
		case err != nil:
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

func withAuditSource(ctx context.Context, g *globalOptions, a *domain.Anchor, fn func(*auditSource) error) error {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout+auditStoreTimeout)
	defer cancel()
	src, err := openAuditSource(ctx, g, a)
	if err != nil {
		return err
	}
	defer src.Close()
	return fn(src)
}

// chainBroken is a verification failure (exit code 5, like every
// security finding).
func chainBroken(p *audit.Problem) error {
	return withHint(fmt.Errorf("audit trail verification failed: %w", p), exitSecurity,
		"the state store was changed outside lazaret; keep a copy of it (and of any export) before anything else")
}

func runAuditVerify(ctx context.Context, g *globalOptions, profile string, asJSON bool) error {
	a, err := g.auditAnchor(profile)
	if err != nil {
		return err
	}
	var r audit.Report
	err = withAuditSource(ctx, g, a, func(src *auditSource) error {
		var err error
		r, err = src.verify(ctx)
		return err
	})
	if err != nil && !errors.Is(err, errNoTrail) {
		return err
	}
	if asJSON {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(g.io.Out, "%s\n", audit.EscapeJSON(b))
	} else if r.OK() {
		if r.Entries == 0 {
			fmt.Fprintln(g.io.Out, "audit trail empty: nothing to verify")
		} else {
			fmt.Fprintf(g.io.Out, "audit trail verified: %d entries, last seq %d, sha256 %s\n", r.Entries, r.Head.Seq, r.Head.Hash)
		}
	}
	if !r.OK() {
		r.Problem.Reason = audit.Escape(r.Problem.Reason)
		return chainBroken(r.Problem)
	}
	return nil
}

// exportHeader is everything of an export but its entries.
type exportHeader struct {
	Format       string       `json:"format"`
	Domain       string       `json:"domain"`
	Profile      string       `json:"profile"`
	Workspace    string       `json:"workspace"`
	Exported     time.Time    `json:"exported"`
	Verification audit.Report `json:"verification"`
}

// runAuditExport writes {"format":…,"verification":{…},"entries":[…]}. The
// entries carry seq, prev and hash: encoded again canonically, they verify
// with audit.Verifier without the database. The export is written whole even when the chain
// does not verify (records are never dropped), and then exits 5.
func runAuditExport(ctx context.Context, g *globalOptions, profile string) error {
	a, err := g.auditAnchor(profile)
	if err != nil {
		return err
	}
	h := exportHeader{Format: exportFormat, Domain: a.Hash, Profile: a.Profile, Workspace: a.Workspace, Exported: time.Now().UTC()}
	w := bufio.NewWriter(g.io.Out)
	defer w.Flush()
	n := 0
	writeHeader := func() error {
		b, err := json.Marshal(h)
		if err != nil {
			return err
		}
		// Reopen the object to append the entries array.
		_, err = fmt.Fprintf(w, "%s,\"entries\":[", audit.EscapeJSON(b[:len(b)-1]))
		return err
	}
	err = withAuditSource(ctx, g, a, func(src *auditSource) error {
		var err error
		if h.Verification, err = src.verify(ctx); err != nil {
			return err
		}
		if err := writeHeader(); err != nil {
			return err
		}
		return src.queryJSON(ctx, audit.Filter{}, func(raw []json.RawMessage) error {
			for _, b := range raw {
				sep := ",\n"
				if n == 0 {
					sep = "\n"
				}
				if _, err := fmt.Fprintf(w, "%s%s", sep, audit.EscapeJSON(b)); err != nil {
					return err
				}
				n++
			}
			return nil
		})
	})
	if errors.Is(err, errNoTrail) {
		err = writeHeader()
	}
	if err != nil {
		return err
	}
	if _, err := fmt.Fprint(w, "\n]}\n"); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if p := h.Verification.Problem; p != nil {
		p.Reason = audit.Escape(p.Reason)
		return chainBroken(p)
	}
	return nil
}

// auditPolicyChange asks the domain's coordinator to record a run-time
// policy change in the audit trail. The change itself is already made, so
// a failure is a warning, not an error.
func (g *globalOptions) auditPolicyChange(ctx context.Context, a *domain.Anchor, action string, fields map[string]string) {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	c, err := g.domainClient(a).dial(ctx)
	if err == nil {
		defer c.Close()
		_, err = ctl.RecordPolicyChange(ctx, c.Conn, ctl.PolicyChange{Action: action, Fields: fields})
	}
	if err != nil {
		fmt.Fprintf(g.io.ErrOut, "lazaret: warning: the change is not in the audit trail: %v\n", err)
	}
}
