package cli

// Where `lazaret audit` reads a domain's trail: through its running
// coordinator, or the state store directly when none runs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

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
		return s.client.QueryAudit(ctx, f, fn)
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
		return s.client.QueryAuditJSON(ctx, f, fn)
	}
	entries, err := s.st.AuditJSON(ctx, f)
	if err != nil {
		return err
	}
	return fn(entries)
}

func (s *auditSource) verify(ctx context.Context) (audit.Report, error) {
	if s.client != nil {
		return s.client.VerifyAudit(ctx)
	}
	return s.st.Verify(ctx)
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
