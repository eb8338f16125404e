package kubecli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/refsync"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
)

// storeTimeout bounds the wait for the domain's state store (another
// lazaret command may hold it for a moment).
const storeTimeout = 10 * time.Second

// auditTo is where a cluster sandbox's findings go: the state store of its
// Domain Anchor (the same profile × workspace), the trail `lazaret audit`
// shows and verifies, opened for each entry: no coordinator holds it for
// a cluster sandbox.
func (g *globals) auditTo(cfg *config.Config, t *target) refsync.AuditFunc {
	return func(ctx context.Context, e audit.Entry) (uint64, error) {
		a, err := g.anchorOf(cfg, t)
		if err != nil {
			return 0, err
		}
		if err := os.MkdirAll(a.Root(), 0o700); err != nil {
			return 0, fmt.Errorf("domain directory: %w", err)
		}
		st, err := store.Open(ctx, a.StateDB(), store.Options{Role: "lazaret-kube", Timeout: storeTimeout, Log: g.log})
		if err != nil {
			return 0, err
		}
		defer st.Close()
		return st.AppendAudit(ctx, e)
	}
}
