package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
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

// auditPolicyChange asks the domain's coordinator to record a run-time
// policy change in the audit trail. The change itself is already made, so
// a failure is a warning, not an error.
func (g *globalOptions) auditPolicyChange(ctx context.Context, a *domain.Anchor, action string, fields map[string]string) {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	c, err := g.domainClient(a).dial(ctx)
	if err == nil {
		defer c.Close()
		_, err = c.RecordPolicyChange(ctx, ctl.PolicyChange{Action: action, Fields: fields})
	}
	if err != nil {
		fmt.Fprintf(g.io.ErrOut, "lazaret: warning: the change is not in the audit trail: %v\n", err)
	}
}
