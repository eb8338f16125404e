package cli

import (
	"context"
	"fmt"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

type psOptions struct {
	json bool
}

func newPsCmd(g *globalOptions) *cobra.Command {
	o := &psOptions{}
	cmd := &cobra.Command{
		Short: "List the running sandboxes of this user",
		RunE:  func(cmd *cobra.Command, _ []string) error { return runPs(cmd.Context(), g, o) },
	}
	clicore.Verb("ps", cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

// runningDomain is a coordinator found in the runtime directory.
type runningDomain struct {
	Hash   string
	Socket string
	Status *ctl.Status // nil when the socket does not answer
}

// scanDomains asks every control socket in the user's runtime directory
// for its status, in parallel.
func scanDomains(ctx context.Context, g *globalOptions) ([]runningDomain, error) {
	rt, err := domain.RuntimeDir()
	if err != nil {
		return nil, err
	}
	// The socket names come from the one table of paths: a wildcard hash.
	pattern := (&domain.Anchor{RuntimeDir: rt, Hash: "*"}).ControlSocket()
	prefix, suffix, _ := strings.Cut(filepath.Base(pattern), "*")
	socks, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	out := make([]runningDomain, len(socks))
	var wg sync.WaitGroup
	for i, s := range socks {
		base := filepath.Base(s)
		out[i] = runningDomain{Hash: strings.TrimSuffix(strings.TrimPrefix(base, prefix), suffix), Socket: s}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialSocket(ctx, s, g.log)
			if err != nil {
				return
			}
			defer c.Close()
			if st, err := c.Status(ctx); err == nil {
				out[i].Status = &st
			}
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Hash < out[j].Hash })
	return out, nil
}

func runPs(ctx context.Context, g *globalOptions, o *psOptions) error {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	list, err := scanDomains(ctx, g)
	if err != nil {
		return err
	}
	running := []*ctl.Status{}
	for _, d := range list {
		if d.Status != nil {
			running = append(running, d.Status)
		}
	}
	if o.json {
		return writeJSON(g.io.Out, running)
	}
	if len(running) == 0 {
		fmt.Fprintln(g.io.Out, "no sandbox running")
	} else {
		tw := newTable(g.io.Out, "DOMAIN\tPROFILE\tSESSIONS\tUPTIME\tCONTAINER\tWORKSPACE")
		for _, st := range running {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", field(st.Domain), field(st.Profile), len(st.Sessions),
				roundDuration(time.Duration(st.Uptime)), field(st.Container.Name), field(st.Workspace))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return printKept(g, running)
}

// printKept lists the kept sessions (`lazaret attach` takes them) with
// what each waits on (its pending requests, from its coordinator).
func printKept(g *globalOptions, running []*ctl.Status) error {
	list, err := clicore.KeptList("")
	if err != nil {
		return err
	}
	pending := map[string][]string{}
	for _, st := range running {
		for _, s := range st.Sessions {
			pending[s.ID] = s.Pending
		}
	}
	return clicore.PrintKept(g.io.Out, list, pending)
}
