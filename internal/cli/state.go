package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/cli/statecmd"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/hostres"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

type stateOptions struct {
	json bool
	yes  bool
}

func newStateCmd(g *globalOptions) *cobra.Command {
	o := &stateOptions{}
	cmd := &cobra.Command{
		Short: "Show the persistent directories (State Anchor) of this workspace's sandbox",
		Long: `Show each persistent dir of the profile for the current workspace: the size and
host path of the changes made in the sandbox, and the image they were last used
with. Changes survive restarts and image updates (the new image becomes the base,
the changes stay on top of it).`,
		ValidArgsFunction: g.completeProfiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runState(cmd.Context(), g, o, firstArg(args))
		},
	}
	clicore.Verb("state", cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	reset := &cobra.Command{
		Use:   "reset [PROFILE] [DIR]",
		Short: "Discard the changes of a persistent dir (all of the profile's when DIR is omitted)",
		Long: `Discard what the sandbox changed in a persistent dir, so the next start sees the
image's version again. Asks for confirmation on a terminal; elsewhere --yes is
required. Refuses while the sandbox of this workspace runs.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			profile, dir, err := stateResetArgs(args)
			if err != nil {
				return err
			}
			return runStateReset(cmd.Context(), g, o, profile, dir)
		},
	}
	reset.Flags().BoolVarP(&o.yes, "yes", "y", false, "do not ask for confirmation")
	cmd.AddCommand(reset, newStateLayerCmd(g, "fold"), newStateLayerCmd(g, "drop"))
	return cmd
}

// newStateLayerCmd is `state fold` or `state drop`: the user's decision on
// a pending layer of the profile's State Anchor that did not fast-forward.
func newStateLayerCmd(g *globalOptions, verb string) *cobra.Command {
	short := "Fold a pending layer into the profile's persistent dirs (its entries replace the profile's)"
	if verb == "drop" {
		short = "Discard a pending layer of the profile's persistent dirs"
	}
	return &cobra.Command{
		Use:   verb + " [PROFILE] LAYER",
		Short: short,
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, a, err := g.stateDomain(firstArg(args[:len(args)-1]))
			if err != nil {
				return err
			}
			st, id := statestore.Locate(a, p.Persist), args[len(args)-1]
			do := statecmd.FoldLayer
			if verb == "drop" {
				do = statecmd.DropLayer
			}
			if err := do(cmd.Context(), g.podmanClient(), st, id); err != nil {
				return fmt.Errorf("state %s: %w", verb, err)
			}
			fmt.Fprintf(g.io.Out, "layer %s: %s\n", id, map[string]string{"fold": "folded", "drop": "dropped"}[verb])
			return nil
		},
	}
}

// stateResetArgs tells PROFILE from DIR: a dir is absolute, a profile name
// never contains a slash.
func stateResetArgs(args []string) (profile, dir string, err error) {
	switch len(args) {
	case 1:
		if strings.HasPrefix(args[0], "/") {
			return "", args[0], nil
		}
		return args[0], "", nil
	case 2:
		if !strings.HasPrefix(args[1], "/") {
			return "", "", usageError{fmt.Errorf("DIR %q: must be an absolute container path such as /usr", args[1])}
		}
		return args[0], args[1], nil
	}
	return "", "", nil
}

func (g *globalOptions) stateDomain(profile string) (*config.Profile, *domain.Anchor, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	return g.resolveDomain(cfg, profile, "")
}

type stateJSON struct {
	Profile   string `json:"profile"`
	Workspace string `json:"workspace"`
	Hash      string `json:"hash"`
	// PackageState is config.Profile.PackageStateNote: the package
	// database lazaret persists with /usr unlisted, or not at all.
	PackageState string                `json:"package_state,omitempty"`
	Dirs         []statecmd.DirState   `json:"dirs"`
	Layers       []statecmd.LayerState `json:"layers,omitempty"`
	Disk         *stateDisk            `json:"disk,omitempty"`
}

// stateDisk is the free space the persistent dirs' changes take from, and
// the reserve the sandbox keeps there (disk_reserve: it pauses below).
type stateDisk struct {
	Path    string `json:"path"`
	Total   uint64 `json:"total_bytes"`
	Free    uint64 `json:"free_bytes"`
	Reserve uint64 `json:"reserve_bytes"`
}

// diskOf is the filesystem of the domain's data root against p's reserve;
// nil when it cannot be read.
func diskOf(p *config.Profile, a *domain.Anchor) *stateDisk {
	total, free, err := hostres.Filesystem(a.DataRoot)
	if err != nil {
		return nil
	}
	return &stateDisk{Path: a.DataRoot, Total: total, Free: free, Reserve: p.Resources.DiskReserve.Of(total)}
}

func runState(ctx context.Context, g *globalOptions, o *stateOptions, profile string) error {
	p, a, err := g.stateDomain(profile)
	if err != nil {
		return err
	}
	states, err := statecmd.Inspect(ctx, g.podmanClient(), statestore.Locate(a, p.Persist), p.PersistentDirs)
	if err != nil {
		return err
	}
	layers, _, err := statecmd.Layers(statestore.Locate(a, p.Persist))
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(g.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(stateJSON{Profile: a.Profile, Workspace: a.Workspace, Hash: a.Hash, PackageState: p.PackageStateNote(), Dirs: states, Layers: layers, Disk: diskOf(p, a)})
	}
	fmt.Fprintf(g.io.Out, "profile %s, workspace %s (domain %s)\n", a.Profile, a.Workspace, a.Hash)
	if n := p.PackageStateNote(); n != "" {
		fmt.Fprintln(g.io.Out, n)
	}
	if d := diskOf(p, a); d != nil {
		fmt.Fprintf(g.io.Out, "disk: %s free of %s on the data root's filesystem; disk_reserve %s keeps %s (a sandbox pauses below it)\n",
			config.FormatSize(int64(d.Free)), config.FormatSize(int64(d.Total)), p.Resources.DiskReserve, config.FormatSize(int64(d.Reserve)))
	}
	if len(states) == 0 {
		fmt.Fprintln(g.io.Out, "no persistent dirs (persistent_dirs in the profile)")
		return nil
	}
	w := newTable(g.io.Out, "DIR\tCHANGES\tMOUNTED\tLAST IMAGE\tPATH")
	for _, s := range states {
		img := "-"
		if r := s.Record; r != nil {
			img = stateShortID(r.ImageID) + " " + r.Image
			if r.PreviousImageID != "" {
				img += " (changes begun on " + stateShortID(r.PreviousImageID) + ")"
			}
		}
		mounted := "no"
		if s.Mounted {
			mounted = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Dir, stateSize(s.Bytes), mounted, img, s.Changes)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	printStateLayers(g, a, layers)
	return nil
}

// printStateLayers lists the sandboxes' layers of a shared State Anchor:
// running ones, and pending ones with what becomes of them.
func printStateLayers(g *globalOptions, a *domain.Anchor, layers []statecmd.LayerState) {
	for _, l := range layers {
		switch {
		case l.State == statestore.LayerActive:
			fmt.Fprintf(g.io.Out, "layer %s: running, sandbox of %s\n", l.ID, l.Workspace)
		case l.FastForward:
			fmt.Fprintf(g.io.Out, "layer %s: pending, from %s; folds into the profile's dirs when no sandbox of the profile runs\n", l.ID, l.Workspace)
		default:
			fmt.Fprintf(g.io.Out, "layer %s: pending, from %s; the profile's dirs changed since it began: fold it (its entries replace the profile's) with `lazaret state fold %s %s`, or discard it with `lazaret state drop %s %s`\n",
				l.ID, l.Workspace, a.Profile, l.ID, a.Profile, l.ID)
		}
	}
}

func runStateReset(ctx context.Context, g *globalOptions, o *stateOptions, profile, dir string) error {
	p, a, err := g.stateDomain(profile)
	if err != nil {
		return err
	}
	dirs := p.PersistentDirs
	st := statestore.Locate(a, p.Persist)
	if dir != "" {
		if err := statestore.ValidateDir(dir); err != nil {
			return usageError{err}
		}
		if !slices.Contains(dirs, dir) {
			// Changes of a dir removed from the profile may still be on
			// disk; allow discarding them too.
			if !st.Has(dir) {
				return usageError{fmt.Errorf("%s is not a persistent dir of profile %s and has no changes", dir, a.Profile)}
			}
		}
		dirs = []string{dir}
	}
	if len(dirs) == 0 {
		fmt.Fprintf(g.io.Out, "profile %s has no persistent dirs\n", a.Profile)
		return nil
	}

	// No sandbox may start while we delete; one already running is found
	// by its coordinator or its container.
	err = g.domainClient(a).maintain(ctx, false, func() error {
		return resetStates(ctx, g, o, a, st, dirs)
	})
	if errors.Is(err, errDomainLocked) || errors.Is(err, errCoordinatorLive) {
		return stateBusy(a, err.Error())
	}
	return err
}

// resetStates discards the changes of dirs, under the domain's lock.
func resetStates(ctx context.Context, g *globalOptions, o *stateOptions, a *domain.Anchor, st statestore.Store, dirs []string) error {
	pc := g.podmanClient()
	if ok, err := pc.ContainerExists(ctx, a.Container()); err != nil {
		return stateBusy(a, "cannot tell whether container "+a.Container()+" exists: "+err.Error())
	} else if ok {
		return stateBusy(a, "container "+a.Container()+" exists")
	}
	if st.Shared {
		// No other workspace's sandbox may use the profile's overlays.
		plock, err := statestore.LockProfile(ctx, pc, st.Root, a)
		if err != nil {
			return fmt.Errorf("state reset: %w", err)
		}
		defer plock.Release()
	}

	states, err := statecmd.Inspect(ctx, pc, st, dirs)
	if err != nil {
		return err
	}
	if !o.yes {
		in, isFile := g.io.In.(*os.File)
		if !isFile || !term.IsTerminal(int(in.Fd())) {
			return usageError{errors.New("state reset discards changes: confirm with --yes when not on a terminal")}
		}
		for _, s := range states {
			fmt.Fprintf(g.io.ErrOut, "  %s: %s of changes in %s\n", s.Dir, stateSize(s.Bytes), s.Changes)
		}
		// prompt.Confirm: keys typed before the question was readable
		// do not answer it.
		ok, err := prompt.Confirm(in, g.io.ErrOut, fmt.Sprintf("Discard these changes of profile %s? [y/N] ", a.Profile))
		if err != nil || !ok {
			return errors.New("state reset: not confirmed; nothing changed")
		}
	}
	for _, s := range states {
		if err := statecmd.Reset(ctx, pc, st, s.Dir); err != nil {
			if errors.Is(err, statecmd.ErrInUse) {
				return stateBusy(a, err.Error())
			}
			return err
		}
		fmt.Fprintf(g.io.Out, "%s: changes discarded (%s)\n", s.Dir, stateSize(s.Bytes))
	}
	return nil
}

func stateBusy(a *domain.Anchor, why string) error {
	return withHint(fmt.Errorf("state reset: the sandbox of profile %s in %s is in use: %s", a.Profile, a.Workspace, why),
		exitFailure, "stop it first with "+verbLine("stop", a.Profile))
}

func stateShortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

func stateSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
