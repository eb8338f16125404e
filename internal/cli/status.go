package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/cli/review"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// controlTimeout bounds a status or ps request.
const controlTimeout = 10 * time.Second

type statusOptions struct {
	json bool
}

func newStatusCmd(g *globalOptions) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Short: "Show the sandbox of this directory: container, sessions, uptime",
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := ""
			if len(args) == 1 {
				profile = args[0]
			}
			return runStatus(cmd.Context(), g, o, profile)
		},
	}
	clicore.Verb("status", cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

// statusJSON is `lazaret status --json`: Running is false (and Status
// nil) when no coordinator runs for the domain.
type statusJSON struct {
	Running   bool        `json:"running"`
	Domain    string      `json:"domain"`
	Profile   string      `json:"profile"`
	Workspace string      `json:"workspace"`
	Status    *ctl.Status `json:"status,omitempty"`
	// Persistent are the State Anchor records of the profile's persistent
	// dirs: which image each overlay was last used with.
	Persistent []statestore.Record `json:"persistent,omitempty"`
	// SkippedBranches are the agent's branches the ref sync did not bring
	// over (escaped names).
	SkippedBranches []string `json:"skipped_branches,omitempty"`
	// SideBranches are the agent's other branches kept on the host
	// (refs/lazaret/<p>/heads/*; escaped names).
	SideBranches []sideBranchJSON `json:"side_branches,omitempty"`
	// SpareSidecar: not running, and a spare network sidecar the last
	// sandbox left waits for the next start.
	SpareSidecar bool `json:"spare_sidecar,omitempty"`
}

type sideBranchJSON struct {
	Name  string `json:"name"`
	Ref   string `json:"ref"`
	Tip   string `json:"tip"`
	Ahead int    `json:"commits_not_in_head"`
}

// sideBranches reads the agent's side branches from the host repository
// (branch mode only; a workspace git cannot read just has none to show).
func sideBranches(ctx context.Context, g *globalOptions, gitMode string, a *domain.Anchor) []sideBranchJSON {
	if mode, err := gitrepo.ResolveMode(gitMode, a.Workspace); err != nil || mode != gitrepo.ModeBranch {
		return nil
	}
	git := g.hostGit()
	repo, err := gitrepo.OpenHostRepo(ctx, git, a.Workspace)
	if err != nil {
		g.log.Debug("status: host repository", "err", err)
		return nil
	}
	r := &review.Review{Git: git, Repo: repo, Map: gitrepo.RefMapOf(a)}
	bs, err := r.SideBranches(ctx)
	if err != nil {
		g.log.Warn("status: listing the agent's side branches", "err", err)
		return nil
	}
	out := make([]sideBranchJSON, len(bs))
	for i, b := range bs {
		out[i] = sideBranchJSON{Name: field(b.Name), Ref: field(b.Ref), Tip: b.Tip, Ahead: b.Ahead}
	}
	return out
}

func printSideBranches(w io.Writer, bs []sideBranchJSON) {
	if len(bs) == 0 {
		return
	}
	tw := newTable(w, "\nSIDE BRANCH\tTIP\tNOT IN HEAD\tHOST REF")
	for _, b := range bs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", b.Name, short(b.Tip), gitrepo.Commits(b.Ahead), b.Ref)
	}
	tw.Flush()
}

func runStatus(ctx context.Context, g *globalOptions, o *statusOptions, profile string) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	p, a, err := g.resolveDomain(cfg, profile, "")
	if err != nil {
		return err
	}
	persistent := overlayRecords(g, a, p.Persist, p.PersistentDirs)
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	out := statusJSON{Domain: a.Hash, Profile: a.Profile, Workspace: a.Workspace, Persistent: persistent,
		SkippedBranches: gitrepo.ReadSkippedRefs(a.Root()), SideBranches: sideBranches(ctx, g, p.GitMode, a)}
	c, err := g.domainClient(a).dial(ctx)
	switch {
	case errors.Is(err, connect.ErrNotRunning):
	case err != nil:
		return err
	default:
		defer c.Close()
		st, err := c.Status(ctx)
		switch {
		case errors.Is(err, ctl.ErrClosed):
			// It finished its teardown while we asked: not running.
		case err != nil:
			return fmt.Errorf("status: %w", err)
		default:
			out.Running, out.Status = true, &st
		}
	}
	if !out.Running {
		// One request on the sidecar's socket, no podman call.
		out.SpareSidecar, _ = (&netdapi.Client{Socket: a.NetdSocket(), Timeout: time.Second}).Spare(ctx)
	}
	if o.json {
		return writeJSON(g.io.Out, out)
	}
	if !out.Running {
		fmt.Fprintf(g.io.Out, "not running: profile %s in %s (domain %s)\n", a.Profile, field(a.Workspace), a.Hash)
		if out.SpareSidecar {
			fmt.Fprintln(g.io.Out, "a spare network sidecar waits for the next start (`lazaret stop` removes it)")
		}
	} else {
		printStatus(g.io.Out, out.Status)
	}
	printOverlayRecords(g.io.Out, persistent)
	printSideBranches(g.io.Out, out.SideBranches)
	if len(out.SkippedBranches) > 0 {
		fmt.Fprintf(g.io.Out, "git: sandbox branches not synced (names lazaret refuses; see lazaret audit): %s\n", strings.Join(out.SkippedBranches, " "))
	}
	return nil
}

// overlayRecords reads, without podman, which image each persistent dir's
// overlay was last used with; dirs never mounted have no record.
func overlayRecords(g *globalOptions, a *domain.Anchor, persist string, dirs []string) []statestore.Record {
	var recs []statestore.Record
	for _, dir := range dirs {
		rec, err := statestore.Locate(a, persist).Record(dir)
		if err != nil {
			g.log.Warn("unreadable State Anchor record", "dir", dir, "err", err)
			continue
		}
		if rec != nil {
			recs = append(recs, *rec)
		}
	}
	return recs
}

func printOverlayRecords(w io.Writer, recs []statestore.Record) {
	if len(recs) == 0 {
		return
	}
	tw := newTable(w, "\nPERSISTENT\tLAST IMAGE\tIMAGE ID\tDIGEST\tLAST MOUNTED")
	for _, r := range recs {
		digest := r.ImageDigest
		if digest == "" {
			digest = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.12s\t%s\t%s\n", field(r.Dir), field(r.Image), field(r.ImageID), field(digest), r.MountedAt.Local().Format(time.DateTime))
	}
	tw.Flush()
}

func printStatus(w io.Writer, st *ctl.Status) {
	tw := newTable(w, "")
	state := "running"
	if st.ShuttingDown {
		state = "shutting down"
		if st.Reason != "" {
			state += " (" + st.Reason + ")"
		}
	}
	fmt.Fprintf(tw, "domain\t%s\nprofile\t%s\nworkspace\t%s\ncoordinator\tpid %d, %s, up %s\n",
		field(st.Domain), field(st.Profile), field(st.Workspace), st.PID, state, roundDuration(time.Duration(st.Uptime)))
	fmt.Fprintf(tw, "container\t%s (%s)\nimage\t%s\nruntime\t%s\n",
		field(st.Container.Name), field(st.Container.State), field(st.Container.Image), field(st.Container.Runtime))
	comps := "none"
	if len(st.Components) > 0 {
		comps = field(strings.Join(st.Components, ", "))
	}
	fmt.Fprintf(tw, "components\t%s\n", comps)
	printLimits(tw, st.Limits)
	fmt.Fprintf(tw, "sessions\t%d\n", len(st.Sessions))
	tw.Flush()
	if len(st.Sessions) == 0 {
		return
	}
	tw = newTable(w, "\nSESSION\tPID\tTTY\tATTACHED\tCOMMAND")
	for _, s := range st.Sessions {
		fmt.Fprintf(tw, "%s\t%d\t%v\t%s ago\t%s\n", field(s.ID[:min(12, len(s.ID))]), s.PeerPID, s.TTY, roundDuration(time.Since(s.Attached)), argvField(s.Command))
	}
	tw.Flush()
}

// printLimits writes one line per resource limit: the usage against it.
func printLimits(tw io.Writer, l *ctl.LimitsStatus) {
	if l == nil {
		return
	}
	if m := l.Memory; m != nil {
		line := fmt.Sprintf("%s used of %s", config.FormatSize(m.Used), config.FormatSize(m.Limit))
		switch {
		case m.Unenforced != "":
			line += " (not enforced: " + field(m.Unenforced) + ")"
		case m.Stopped:
			line += " (exceeded: stopping)"
		case m.Kills == 1:
			line += " (1 process killed at the limit)"
		case m.Kills > 1:
			line += fmt.Sprintf(" (%d processes killed at the limit)", m.Kills)
		}
		fmt.Fprintf(tw, "memory\t%s\n", line)
	}
	for _, d := range l.Disk {
		line := fmt.Sprintf("%s free on %s (%s), reserve %s", config.FormatSize(int64(d.Free)), field(d.Device), field(d.Path), config.FormatSize(int64(d.Reserve)))
		if d.Reserve == 0 {
			line = fmt.Sprintf("%s free on %s (%s), no reserve", config.FormatSize(int64(d.Free)), field(d.Device), field(d.Path))
		}
		if d.Paused {
			line += " (below it: the sandbox is paused)"
		}
		fmt.Fprintf(tw, "disk\t%s\n", line)
	}
	if c := l.CPUs; c != nil {
		fmt.Fprintf(tw, "cpus\t%s (%s)\n", field(c.Value), field(c.Mechanism))
	}
	if p := l.Pids; p != nil {
		fmt.Fprintf(tw, "pids\t%s (%s)\n", field(p.Value), field(p.Mechanism))
	}
}

func roundDuration(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}
