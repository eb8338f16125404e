package cli

// `lazaret audit verify`: the hash chain checked end to end.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

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
