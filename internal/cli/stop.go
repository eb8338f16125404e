package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// stopTimeout bounds a stop, teardown included.
const stopTimeout = 2 * time.Minute

type stopOptions struct {
	all bool
}

func newStopCmd(g *globalOptions) *cobra.Command {
	o := &stopOptions{}
	cmd := &cobra.Command{
		Short: "Stop the sandbox of this directory (attached sessions are ended)",
		Long: `Stop the sandbox of PROFILE (default "default") for the current directory:
attached shells and commands are told and end, the container is removed and
the coordinator exits (a stop leaves no spare network sidecar; with no
sandbox running, the spare the last one left is removed). With --all, stop
every sandbox of this configuration's data_root and remove its leftover
containers and spare sidecars; it needs only data_root, so a configuration
broken elsewhere is used, its problems printed as warnings.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.all && len(args) > 0 {
				return usageError{errors.New("stop: --all takes no PROFILE")}
			}
			profile := ""
			if len(args) == 1 {
				profile = args[0]
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), stopTimeout)
			defer cancel()
			if o.all {
				return runStopAll(ctx, g)
			}
			return runStop(ctx, g, profile)
		},
	}
	clicore.Verb("stop", cmd)
	cmd.Flags().BoolVar(&o.all, "all", false, "stop every sandbox of this data_root")
	return cmd
}

func runStop(ctx context.Context, g *globalOptions, profile string) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	_, a, err := g.resolveDomain(cfg, profile, "")
	if err != nil {
		return err
	}
	d := g.domainClient(a)
	err = d.stop(ctx)
	if errors.Is(err, connect.ErrNotRunning) {
		// Nothing answers: remove what a dead coordinator may have left,
		// or the spare sidecar the last sandbox left for the next start.
		n, spares, rerr := d.removeLeftovers(ctx)
		if rerr != nil {
			return rerr
		}
		if err := d.removeDeadRuntime(ctx); err != nil {
			return err
		}
		switch {
		case n > 0:
			fmt.Fprintf(g.io.Out, "removed %d leftover container(s) of domain %s\n", n, a.Hash)
		case spares > 0:
			fmt.Fprintf(g.io.Out, "not running: profile %s in %s (its spare network sidecar removed)\n", a.Profile, a.Workspace)
		default:
			fmt.Fprintf(g.io.Out, "not running: profile %s in %s\n", a.Profile, a.Workspace)
		}
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(g.io.Out, "stopped %s\n", a.Container())
	return nil
}

func runStopAll(ctx context.Context, g *globalOptions) error {
	cfg, err := g.loadDataRootConfig()
	if err != nil {
		return err
	}
	list, err := scanDomains(ctx, g)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, d := range list {
		if d.Status == nil || d.Status.DataRoot != cfg.DataRoot {
			continue // dead, or another configuration's sandbox
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := stopCoordinator(ctx, d.Socket, g.log); err != nil && !errors.Is(err, connect.ErrNotRunning) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", d.Status.Container.Name, err))
				mu.Unlock()
				return
			}
			fmt.Fprintf(g.io.Out, "stopped %s\n", field(d.Status.Container.Name))
		}()
	}
	wg.Wait()
	n, spares, err := removeDeadDomains(ctx, g, cfg)
	if err != nil {
		errs = append(errs, err)
	}
	if n > 0 {
		fmt.Fprintf(g.io.Out, "removed %d leftover container(s)\n", n)
	}
	if spares > 0 {
		fmt.Fprintf(g.io.Out, "removed %d spare network sidecar(s)\n", spares)
	}
	return errors.Join(errs...)
}

// removeDeadDomains removes the leftovers of every domain of cfg's
// data_root whose coordinator is dead: its containers (found by the
// agent container's data_root label, or the spare sidecar's) and its
// runtime files.
func removeDeadDomains(ctx context.Context, g *globalOptions, cfg *config.Config) (leftovers, spares int, err error) {
	pm := g.podmanClient()
	list, err := pm.ListByLabel(ctx, domain.LabelDataRoot, cfg.DataRoot)
	if err != nil {
		return 0, 0, err
	}
	spareList, err := pm.ListByLabel(ctx, domain.LabelSpare, cfg.DataRoot)
	if err != nil {
		return 0, 0, err
	}
	list = append(list, spareList...)
	rt, err := domain.RuntimeDir()
	if err != nil {
		return 0, 0, err
	}
	socketDir := cmp.Or(cfg.Escalation.SocketDir, rt)
	seen := map[string]bool{}
	var errs []error
	for _, c := range list {
		hash := c.Labels[domain.LabelKey]
		if hash == "" {
			if err := pm.RemoveContainer(ctx, c.ID, 0); err != nil {
				return leftovers, spares, err
			}
			leftovers++
			continue
		}
		if seen[hash] {
			continue
		}
		seen[hash] = true
		d := g.domainClient(&domain.Anchor{RuntimeDir: rt, SocketDir: socketDir, Hash: hash})
		n, s, err := d.removeLeftovers(ctx) // nothing while its coordinator is alive
		if err != nil {
			return leftovers, spares, err
		}
		leftovers, spares = leftovers+n, spares+s
		if n+s > 0 {
			errs = append(errs, d.removeDeadRuntime(ctx))
		}
	}
	return leftovers, spares, errors.Join(errs...)
}
