package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
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
		if err := removeDeadRuntime(ctx, g, a); err != nil {
			return err
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
			fmt.Fprintf(g.io.Out, "stopped %s\n", field(d.Status.Container.Name))
		}()
	}
	wg.Wait()
	n, dead, err := removeLeftoverDomains(ctx, g, sandbox.LabelDataRoot, cfg.DataRoot)
	if err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		fmt.Fprintf(g.io.Out, "removed %d leftover container(s)\n", n)
	}
	if rt, err := domain.RuntimeDir(); err == nil {
		socketDir := cfg.Escalation.SocketDir
		if socketDir == "" {
			socketDir = rt
		}
		for _, h := range dead {
			a := &domain.Anchor{RuntimeDir: rt, SocketDir: socketDir, Hash: h}
			if err := removeDeadRuntime(ctx, g, a); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeLeftovers removes the containers labelled key=value whose domain
// has no live coordinator, together with every other container of those
// domains (a network sidecar carries only the domain label).
func removeLeftovers(ctx context.Context, g *globalOptions, key, value string) (int, error) {
	n, _, err := removeLeftoverDomains(ctx, g, key, value)
	return n, err
}

// removeLeftoverDomains is removeLeftovers that also returns the hashes of
// the dead domains it cleaned.
func removeLeftoverDomains(ctx context.Context, g *globalOptions, key, value string) (int, []string, error) {
	pm := &podman.Client{Log: g.log}
	list, err := pm.ListByLabel(ctx, key, value)
	if err != nil {
		return 0, nil, err
	}
	rt, err := domain.RuntimeDir()
	if err != nil {
		return 0, nil, err
	}
	dead := map[string]bool{}
	var ids []string
	for _, c := range list {
		hash := c.Labels[domain.LabelKey]
		if hash != "" && !dead[hash] {
			sock := (&domain.Anchor{RuntimeDir: rt, Hash: hash}).ControlSocket()
			if cl, err := coord.Dial(ctx, sock, g.log); err == nil {
				cl.Close()
				continue // its coordinator is alive and owns it
			}
			dead[hash] = true
		}
		ids = append(ids, c.ID)
	}
	if key != domain.LabelKey {
		for hash := range dead {
			more, err := pm.ListByLabel(ctx, domain.LabelKey, hash)
			if err != nil {
				return 0, nil, err
			}
			for _, c := range more {
				if !slices.Contains(ids, c.ID) {
					ids = append(ids, c.ID)
				}
			}
		}
	}
	// One at a time: removing a sidecar also removes the agent container
	// joined to it (--depend), which is then already gone.
	for _, id := range ids {
		if err := pm.RemoveContainer(ctx, id, 0); err != nil {
			return 0, nil, err
		}
	}
	hashes := make([]string, 0, len(dead))
	for h := range dead {
		hashes = append(hashes, h)
	}
	return len(ids), hashes, nil
}

// removeDeadRuntime removes the control socket of domain a if nothing
// answers on it, with the other runtime files its dead coordinator's
// components left (the sidecar's and the escalation sockets, the TLS
// directory). It works under the domain's hold-to-bind lock, so that no
// leader is starting a coordinator meanwhile.
func removeDeadRuntime(ctx context.Context, g *globalOptions, a *domain.Anchor) error {
	if _, err := os.Lstat(a.ControlSocket()); err != nil {
		return nil
	}
	lock, err := coord.OpenLock(a.LockFile())
	if err != nil {
		return err
	}
	defer lock.Close()
	if ok, err := lock.TryLock(); err != nil || !ok {
		return err // a leader is at work: the files are its business
	}
	if c, err := coord.Dial(ctx, a.ControlSocket(), g.log); err == nil {
		c.Close()
		return nil
	}
	var errs []error
	for _, sock := range []string{a.ControlSocket(), a.NetdSocket(), a.EscalationSocket()} {
		if fi, err := os.Lstat(sock); err == nil && fi.Mode().Type() == os.ModeSocket {
			if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := os.RemoveAll(a.TLSDir()); err != nil {
		errs = append(errs, err)
	}
	// The network namespace pin (its slirp4netns exited with the
	// coordinator; the pin would keep an empty namespace alive).
	if _, err := os.Lstat(a.Netns()); err == nil {
		if err := (&podman.Client{Log: g.log}).RemoveNetns(ctx, a.Netns()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
