package kubecli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// newStateCmd is `state [PROFILE]` and `state reset`: the cluster's side
// of the local `lazaret state` (the State Anchor), where the persistent
// dirs of a scope are one PVC.
func newStateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Short: "Show the persistent dirs' volume claim of this workspace's sandbox",
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runState(cmd.Context(), firstOf(args))
		},
	}
	clicore.Verb("state", cmd)
	yes := false
	reset := &cobra.Command{
		Use:   "reset [PROFILE] [DIR]",
		Short: "Delete the persistent dirs' volume claim (what the agent installed)",
		Long: `Delete the PVC that holds the profile's persistent dirs for this workspace (the
profile's, with persist = "profile"): the next start copies the image's dirs
again. Refused while a sandbox uses it. Asks on a terminal; elsewhere --yes is
required. DIR is refused: on the cluster a scope's dirs share one volume.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := firstOf(args)
			if strings.HasPrefix(profile, "/") || len(args) == 2 {
				return clicore.UsageError{Err: errors.New("DIR: on the cluster a profile's persistent dirs share one volume claim; reset them all (omit DIR)")}
			}
			return g.runStateReset(cmd.Context(), profile, yes)
		},
	}
	reset.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.AddCommand(reset)
	return cmd
}

func firstOf(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return ""
}

func (g *globals) runState(ctx context.Context, profile string) error {
	cfg, c, t, err := g.clientFor(profile)
	if err != nil {
		return err
	}
	in := stateInput(cfg, t)
	if in == nil {
		fmt.Fprintf(g.io.Out, "profile %s has no persistent dirs\n", t.profile.Name)
		return nil
	}
	name := kubespec.StateName(in.Profile, in.DomainHash)
	w := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, visible.Line(v)) }
	row("profile", t.profile.Name)
	row("dirs", strings.Join(t.profile.PersistentDirs, " "))
	row("scope", t.profile.Persist)
	row("volume claim", name)
	p, err := c.PVC(ctx, name)
	switch {
	case errors.Is(err, kube.ErrNotFound):
		row("state", "not made yet (the next start makes it)")
	case err != nil:
		return err
	default:
		class := "(the cluster's default)"
		if p.Spec.StorageClassName != nil {
			class = *p.Spec.StorageClassName
		}
		capacity := p.Status.Capacity.Storage()
		row("state", string(p.Status.Phase))
		row("requested", p.Spec.Resources.Requests.Storage().String())
		if !capacity.IsZero() {
			row("capacity", capacity.String())
		}
		row("storage class", class)
		row("volume", p.Spec.VolumeName)
		row("age", age(g.now(), p.CreationTimestamp))
	}
	return w.Flush()
}

func (g *globals) runStateReset(ctx context.Context, profile string, yes bool) error {
	cfg, c, t, err := g.clientFor(profile)
	if err != nil {
		return err
	}
	pvcs, err := statePVCs(ctx, cfg, c, t, "")
	if err != nil || len(pvcs) == 0 {
		if err == nil {
			fmt.Fprintf(g.io.Out, "profile %s: no persistent dirs' volume claim for %s\n", t.profile.Name, visible.Line(t.workspace))
		}
		return err
	}
	if user, err := stateUser(ctx, c, &pvcs[0]); err != nil || user != "" {
		if err == nil {
			err = refusal{fmt.Sprintf("persistent dirs %s are in use by %s", pvcs[0].Name, visible.Line(user)),
				"`lazaret --backend kubernetes stop` that sandbox first"}
		}
		return err
	}
	if !yes {
		f, ok := g.io.In.(*os.File)
		if !ok || !isTerminal(f) {
			return clicore.UsageError{Err: errors.New("--yes is required without a terminal: this deletes what the agent installed")}
		}
		// prompt.Confirm: keys typed before the question was readable
		// do not answer it.
		q := fmt.Sprintf("delete %s (the persistent dirs %s of profile %s)? [y/N] ", pvcs[0].Name, strings.Join(t.profile.PersistentDirs, " "), t.profile.Name)
		if ok, err := prompt.Confirm(f, g.io.ErrOut, q); err != nil || !ok {
			return errors.New("not confirmed: nothing deleted")
		}
	}
	return g.purgeState(ctx, c, pvcs)
}
