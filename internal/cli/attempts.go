package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/overlayfs"
	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/attempt"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

// workspaceAnchor resolves profile's Domain Anchor of this workspace, the
// parent of its attempts (whatever --attempt says).
func (g *globalOptions) workspaceAnchor(profile string) (*config.Config, *config.Profile, *domain.Anchor, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	p, a, err := g.resolveDomain(cfg, profile, "")
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, p, a.Parent(), nil
}

func (g *globalOptions) listAttempts(ctx context.Context, profile string) ([]clicore.AttemptInfo, error) {
	_, _, parent, err := g.workspaceAnchor(profile)
	if err != nil {
		return nil, err
	}
	all, err := attempt.List(parent)
	if err != nil {
		return nil, err
	}
	var rs []attempt.Record
	for _, r := range all {
		if r.Backend == "" { // the cluster's: lazaret --backend kubernetes attempts
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return nil, nil
	}
	git := g.hostGit()
	repo, _ := gitrepo.OpenHostRepo(ctx, git, parent.Workspace)
	sizes := g.attemptSizes(ctx, parent, rs)
	out := make([]clicore.AttemptInfo, len(rs))
	for i, r := range rs {
		a, _ := parent.ForAttempt(r.Name)
		info := clicore.AttemptInfo{Name: r.Name, Branch: a.AgentBranch(), Created: r.Created, State: r.State,
			Running: g.domainClient(a).alive(ctx), Bytes: sizes[a.Root()]}
		if repo != nil {
			if tip := repo.ResolveRef(ctx, git, gitrepo.RefMapOf(a).AgentRef()); tip != "" {
				info.Head = tip
				info.Subject, _ = git.Subject(ctx, repo.TopLevel, tip)
			}
		}
		out[i] = info
	}
	return out, nil
}

// attemptSizes measures each attempt's Domain Root (its copy of the
// persistent dirs and its clone), as root of podman's user namespace,
// which may read what the sandbox's sub-uids made.
func (g *globalOptions) attemptSizes(ctx context.Context, parent *domain.Anchor, rs []attempt.Record) map[string]int64 {
	roots := make([]string, 0, len(rs))
	for _, r := range rs {
		a, _ := parent.ForAttempt(r.Name)
		roots = append(roots, a.Root())
	}
	sizes, err := overlayfs.New(g.podmanClient()).DiskUsage(ctx, roots...)
	if err != nil {
		g.log.Warn("attempts: measuring their size", "err", err)
	}
	return sizes
}

// removeAttempt stops the attempt's sandbox, deletes its branches and
// removes its Domain Root, the record last (an interrupted rm is
// finished by running it again).
func (g *globalOptions) removeAttempt(ctx context.Context, profile, name string) (clicore.RemovedAttempt, error) {
	if err := g.refuseRoot(); err != nil {
		return clicore.RemovedAttempt{}, err
	}
	_, _, parent, err := g.workspaceAnchor(profile)
	if err != nil {
		return clicore.RemovedAttempt{}, err
	}
	a, err := parent.ForAttempt(name)
	if err != nil {
		return clicore.RemovedAttempt{}, usageError{fmt.Errorf("attempts rm: %w", err)}
	}
	if _, err := os.Lstat(a.Root()); errors.Is(err, os.ErrNotExist) {
		return clicore.RemovedAttempt{}, withHint(&attempt.NotFoundError{Name: name, Profile: a.Profile, Workspace: a.Workspace},
			exitUsage, "`lazaret attempts` lists this workspace's attempts")
	}
	d := g.domainClient(a)
	if err := d.stop(ctx); err != nil && !errors.Is(err, connect.ErrNotRunning) {
		return clicore.RemovedAttempt{}, err
	}
	if _, _, err := d.removeLeftovers(ctx); err != nil {
		return clicore.RemovedAttempt{}, err
	}
	if err := d.removeDeadRuntime(ctx); err != nil {
		return clicore.RemovedAttempt{}, err
	}
	var removed clicore.RemovedAttempt
	err = d.maintain(ctx, true, func() error {
		var err error
		if removed, err = g.deleteAttemptRefs(ctx, a); err != nil {
			return err
		}
		return removeDomainRoot(ctx, overlayfs.New(g.podmanClient()), a)
	})
	return removed, err
}

// deleteAttemptRefs deletes the attempt's agent branch and side branches
// on the host, in one transaction, and returns the branch's tip.
func (g *globalOptions) deleteAttemptRefs(ctx context.Context, a *domain.Anchor) (clicore.RemovedAttempt, error) {
	m := gitrepo.RefMapOf(a)
	removed := clicore.RemovedAttempt{Branch: m.AgentBranch()}
	git := g.hostGit()
	repo, err := gitrepo.OpenHostRepo(ctx, git, a.Workspace)
	if err != nil {
		return removed, nil // the repository is gone: no branch to delete
	}
	removed.Tip = repo.ResolveRef(ctx, git, m.AgentRef())
	sides, err := gitrepo.ListSideBranches(ctx, git, repo, m)
	if err != nil {
		return removed, err
	}
	var tx strings.Builder
	if removed.Tip != "" {
		fmt.Fprintf(&tx, "delete %s %s\n", m.AgentRef(), removed.Tip)
	}
	for _, b := range sides {
		fmt.Fprintf(&tx, "delete %s %s\n", b.Ref, b.Tip)
	}
	if tx.Len() == 0 {
		return removed, nil
	}
	if err := git.UpdateRefs(ctx, repo.Common(), "lazaret attempts rm", strings.NewReader(tx.String())); err != nil {
		return removed, fmt.Errorf("deleting %s: %w", m.AgentBranch(), err)
	}
	return removed, nil
}

// removeDomainRoot removes an attempt's Domain Root, its record last.
func removeDomainRoot(ctx context.Context, fs *overlayfs.Client, a *domain.Anchor) error {
	es, err := os.ReadDir(a.Root())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var paths []string
	for _, e := range es {
		if p := filepath.Join(a.Root(), e.Name()); p != a.AttemptRecord() {
			paths = append(paths, p)
		}
	}
	if len(paths) > 0 {
		if err := fs.RemoveAll(ctx, paths...); err != nil {
			return err
		}
	}
	return fs.RemoveAll(ctx, a.Root())
}

// keepAttempt makes the attempt's persistent dirs the profile's (or the
// workspace's own, persist = "workspace"): a copy of them replaces the
// parent store's layer, so the attempt keeps its own.
func (g *globalOptions) keepAttempt(ctx context.Context, profile, name string) error {
	if err := g.refuseRoot(); err != nil {
		return err
	}
	_, p, parent, err := g.workspaceAnchor(profile)
	if err != nil {
		return err
	}
	a, err := clicore.OpenAttempt(parent, name, "")
	if err != nil {
		return err
	}
	rec, err := attempt.Read(a)
	if err != nil {
		return err
	}
	if len(p.PersistentDirs) == 0 {
		return usageError{fmt.Errorf("attempts keep: profile %s persists no directory", p.Name)}
	}
	err = g.domainClient(a).maintain(ctx, false, func() error {
		return g.domainClient(parent).maintain(ctx, false, func() error {
			return g.keepUnderLocks(ctx, p, parent, a, rec)
		})
	})
	if errors.Is(err, errCoordinatorLive) || errors.Is(err, errDomainLocked) {
		return withHint(fmt.Errorf("attempts keep: the sandbox of attempt %s or of this workspace runs", name), exitUsage,
			"stop them first: `lazaret stop --attempt "+name+"` and `lazaret stop`")
	}
	return err
}

func (g *globalOptions) keepUnderLocks(ctx context.Context, p *config.Profile, parent, a *domain.Anchor, rec attempt.Record) error {
	dst := statestore.Locate(parent, p.Persist)
	if dst.Shared {
		lock, err := statestore.TryExclusive(dst.Root)
		if err != nil {
			return err
		}
		if lock == nil {
			return withHint(fmt.Errorf("attempts keep: a sandbox of profile %s runs in another workspace", p.Name), exitUsage,
				"`lazaret ps` lists them; stop them, then keep")
		}
		defer lock.Close()
	}
	pc := g.podmanClient()
	// A copy, taken beside the attempt's (same file system: Keep renames
	// it into place), so the attempt keeps its own.
	tmp := statestore.Store{Root: filepath.Join(a.Root(), "keep.tmp"), DataRoot: a.DataRoot}
	fs := overlayfs.New(pc)
	_ = fs.RemoveAll(ctx, tmp.Root)
	defer func() { _ = fs.RemoveAll(context.Background(), tmp.Root) }()
	res, err := statestore.Fork(ctx, pc, statestore.ForkSource{Store: statestore.Locate(a, p.Persist), Dirs: p.PersistentDirs}, tmp)
	if err != nil {
		return fmt.Errorf("attempts keep: copying attempt %s's persistent dirs: %w", a.Attempt, err)
	}
	if res.Mode == "" {
		return usageError{fmt.Errorf("attempts keep: attempt %s has no persistent dirs of its own to keep", a.Attempt)}
	}
	return statestore.Keep(ctx, pc, tmp, dst, p.PersistentDirs, rec.Layers)
}

// attemptsReview runs `attempts diff [PROFILE] A B [--stat]` (B's branch
// against A's) and `attempts merge [PROFILE] NAME [flags]` (`lazaret
// merge --attempt NAME`: the same review flags and refusals).
func (g *globalOptions) attemptsReview(cmd *cobra.Command, verb string, args []string) error {
	var pos, flags []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
		} else {
			pos = append(pos, a)
		}
	}
	if verb == "merge" {
		return g.mergeAttempt(cmd.Context(), pos, flags)
	}
	stat := false
	for _, f := range flags {
		if f != "--stat" {
			return usageError{fmt.Errorf("attempts diff: unknown flag %s (--stat is the one it takes)", f)}
		}
		stat = true
	}
	if len(pos) < 2 || len(pos) > 3 {
		return usageError{errors.New("attempts diff: want [PROFILE] A B")}
	}
	profile := ""
	if len(pos) == 3 {
		profile = pos[0]
	}
	return g.diffAttempts(cmd.Context(), profile, pos[len(pos)-2], pos[len(pos)-1], stat)
}

// diffAttempts shows what attempt b's branch changes against attempt a's.
func (g *globalOptions) diffAttempts(ctx context.Context, profile, a, b string, stat bool) error {
	_, _, parent, err := g.workspaceAnchor(profile)
	if err != nil {
		return err
	}
	anchors := make([]*domain.Anchor, 2)
	for i, n := range []string{a, b} {
		if anchors[i], err = clicore.OpenAttempt(parent, n, clicore.AnyBackend); err != nil {
			return err
		}
	}
	g.attempt = b
	t, err := g.openReview(ctx, profile)
	if err != nil {
		return err
	}
	return t.review.DiffAgainst(ctx, gitrepo.RefMapOf(anchors[0]), g.io.Out, g.io.ErrOut, stat, g.terminalOut())
}

// mergeAttempt is `lazaret merge --attempt NAME [PROFILE]`: the same
// review flags and refusals.
func (g *globalOptions) mergeAttempt(ctx context.Context, pos, flags []string) error {
	if len(pos) < 1 || len(pos) > 2 {
		return usageError{errors.New("attempts merge: want [PROFILE] NAME")}
	}
	o := &mergeOptions{}
	for _, f := range flags {
		switch f {
		case "--squash":
			o.squash = true
		case "--allow-external-symlinks":
			o.allowSymlinks = true
		default:
			return usageError{fmt.Errorf("attempts merge: unknown flag %s (it takes lazaret merge's: --squash, --allow-external-symlinks)", f)}
		}
	}
	profile := ""
	if len(pos) == 2 {
		profile = pos[0]
	}
	g.attempt = pos[len(pos)-1]
	return runMerge(ctx, g, o, profile)
}
