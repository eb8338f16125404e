package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/coord"
	"github.com/lazaret-dev/lazaret/internal/ctl"
	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/podman"
	"github.com/lazaret-dev/lazaret/internal/sandbox"
)

// stopTimeout bounds a stop, teardown included.
const stopTimeout = 2 * time.Minute

type stopOptions struct {
	all bool
}

func newStopCmd(g *globalOptions) *cobra.Command {
	o := &stopOptions{}
	cmd := &cobra.Command{
		Use:   "stop [PROFILE]",
		Short: "Stop the sandbox of this directory (attached sessions are ended)",
		Long: `Stop the sandbox of PROFILE (default "default") for the current directory:
attached shells and commands are told and end, the container is removed and
the coordinator exits. With --all, stop every sandbox of this configuration's
data_root and remove leftover containers of it.`,
		Args: cobra.MaximumNArgs(1),
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
	err = stopSocket(ctx, g, a.ControlSocket())
	if errors.Is(err, coord.ErrNotRunning) {
		// Nothing answers: remove what a dead coordinator may have left.
		n, rerr := removeLeftovers(ctx, g, domain.LabelKey, a.Hash)
		if rerr != nil {
			return rerr
		}
		if n > 0 {
			fmt.Fprintf(g.io.Out, "removed %d leftover container(s) of domain %s\n", n, a.Hash)
		} else {
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

// stopSocket asks the coordinator at socket to stop and waits until it has
// torn down and closed the connection.
func stopSocket(ctx context.Context, g *globalOptions, socket string) error {
	c, err := coord.Dial(ctx, socket, g.log)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Call(ctx, ctl.TypeStop, nil, nil); err != nil && !errors.Is(err, ctl.ErrClosed) {
		return fmt.Errorf("stop: %w", err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func runStopAll(ctx context.Context, g *globalOptions) error {
	cfg, err := g.loadConfig()
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
			if err := stopSocket(ctx, g, d.Socket); err != nil && !errors.Is(err, coord.ErrNotRunning) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", d.Status.Container.Name, err))
				mu.Unlock()
				return
			}
			fmt.Fprintf(g.io.Out, "stopped %s\n", d.Status.Container.Name)
		}()
	}
	wg.Wait()
	if n, err := removeLeftovers(ctx, g, sandbox.LabelDataRoot, cfg.DataRoot); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		fmt.Fprintf(g.io.Out, "removed %d leftover container(s)\n", n)
	}
	return errors.Join(errs...)
}

// removeLeftovers removes the containers labelled key=value whose domain
// has no live coordinator.
func removeLeftovers(ctx context.Context, g *globalOptions, key, value string) (int, error) {
	pm := &podman.Client{Log: g.log}
	list, err := pm.ListByLabel(ctx, key, value)
	if err != nil {
		return 0, err
	}
	rt, err := domain.RuntimeDir()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range list {
		hash := c.Labels[domain.LabelKey]
		sock := (&domain.Anchor{RuntimeDir: rt, Hash: hash}).ControlSocket()
		if hash != "" {
			if cl, err := coord.Dial(ctx, sock, g.log); err == nil {
				cl.Close()
				continue // its coordinator is alive and owns it
			}
		}
		if err := pm.RemoveContainer(ctx, c.ID, 0); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
