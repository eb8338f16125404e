package kubecli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// The approvals verb is clicore's (the local CLI's): it lists and answers
// the pending requests of every control socket of this user on this
// machine, the local coordinators' and the cluster sessions'. The events
// verb follows this workspace's cluster sessions: each lazaret-kube
// session is its own coordinator, with a stream of its own.

func newApprovalsCmd(g *globals) *cobra.Command {
	return clicore.NewApprovalsCmd(&clicore.Approvals{IO: g.io, Log: func() *slog.Logger { return g.log }, Invocation: invocation})
}

// controlTimeout bounds reaching the sessions' control sockets.
const controlTimeout = 10 * time.Second

type eventsOptions struct {
	json  bool
	since uint64
}

func newEventsCmd(g *globals) *cobra.Command {
	o := &eventsOptions{}
	cmd := &cobra.Command{
		Use:   "events [PROFILE]",
		Short: "Stream the events of this directory's cluster sessions until they end",
		Long: "Stream the events of the cluster sessions of PROFILE in this directory that run on this machine\n" +
			"(approval.pending, approval.decided, session.*, agent.attention) until each has ended (exit 0)\n" +
			"or Ctrl-C; --json prints one versioned JSON object a line (docs/APPROVALS.md).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := ""
			if len(args) == 1 {
				profile = args[0]
			}
			return g.runEvents(cmd.Context(), o, profile)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object a line")
	cmd.Flags().Uint64Var(&o.since, "since", 0, "start after this sequence number of each session (0: every event it still keeps)")
	return cmd
}

// sessionSockets are the control sockets of the cluster sessions of t on
// this machine.
func (g *globals) sessionSockets(ctx context.Context, t *target) ([]*ctl.Client, error) {
	rt, err := domain.RuntimeDir()
	if err != nil {
		return nil, err
	}
	socks, err := filepath.Glob(domain.KubeSessionSocket(rt, "*"))
	if err != nil {
		return nil, err
	}
	var out []*ctl.Client
	for _, s := range socks {
		c, err := clicore.DialControl(ctx, s, g.log)
		if err != nil {
			continue
		}
		if st, err := c.Status(ctx); err != nil || st.Domain != t.hash {
			c.Close()
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

func (g *globals) runEvents(ctx context.Context, o *eventsOptions, profile string) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	t, err := g.resolve(cfg, profile)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	clients, err := g.sessionSockets(dctx, t)
	if err != nil {
		return err
	}
	if len(clients) == 0 {
		return clicore.WithHint(fmt.Errorf("no cluster session of profile %s runs in %s on this machine", visible.Line(t.profile.Name), visible.Line(t.workspace)),
			exitcode.Failure, "start one with `"+invocation+" shell` or `"+invocation+" exec`, then run "+invocation+" events")
	}
	p := &clicore.EventPrinter{W: g.io.Out, JSON: o.json, Sessions: len(clients)}
	for _, c := range clients {
		defer c.Close()
		if err := c.SubscribeEvents(dctx, o.since, p.Print); err != nil {
			return fmt.Errorf("events: %w", err)
		}
	}
	for _, c := range clients {
		select {
		case <-ctx.Done():
			return nil // Ctrl-C
		case <-c.Done():
		}
	}
	if p.Ended() {
		return nil
	}
	return errors.New("events: an event stream ended before its session did (this reader fell too far behind, or the session's process went away)")
}
