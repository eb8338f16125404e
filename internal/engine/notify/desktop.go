package notify

import (
	"context"
	"log/slog"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// callTimeout bounds one call to the notification server.
const callTimeout = 5 * time.Second

type desktop struct {
	conn *desktopnotify.Conn
	log  *slog.Logger
}

// newDesktop connects to the bus and asks for the notification server
// once, so that an absent bus or server is one warning at start.
func newDesktop(addr string) (*desktop, error) {
	// The connection outlives this check: Dial's context is its life.
	c, err := desktopnotify.Dial(context.Background(), addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, _, _, err := c.ServerInfo(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return &desktop{conn: c}, nil
}

func (d *desktop) name() string { return "desktop" }

func (d *desktop) run(ctx context.Context, q <-chan Notice) {
	defer d.conn.Close()
	failing := false
	for n := range q {
		if ctx.Err() != nil {
			return
		}
		urgency := desktopnotify.UrgencyNormal
		if n.Kind == ctl.EventApprovalPending {
			urgency = desktopnotify.UrgencyCritical
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := d.conn.Notify(cctx, Title(n), desktopnotify.EscapeMarkup(Body(n)), urgency)
		cancel()
		// One warning when it starts failing, not one per event.
		if err != nil && !failing && d.log != nil {
			d.log.Warn("notify: desktop notification failed", "err", err)
		}
		failing = err != nil
	}
}
