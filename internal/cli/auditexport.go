package cli

// `lazaret audit export`: the trail as a verifiable JSON Lines file.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

// exportFormat names the layout of `lazaret audit export --json`.
const exportFormat = "lazaret.audit-export/1"

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
