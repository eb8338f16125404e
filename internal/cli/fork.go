package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/overlayfs"
	"github.com/lazaret-dev/lazaret/internal/cli/connect"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/attempt"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/domainlock"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// forkTimeout bounds a fork: the ref sync of a running parent and the
// copies of its persistent dirs.
const forkTimeout = 10 * time.Minute

// attemptsSpec is the local backend of `fork` and `attempts`
// (clicore.AttemptsSpec).
func (g *globalOptions) attemptsSpec() clicore.AttemptsSpec {
	return clicore.AttemptsSpec{
		Out: func() io.Writer { return g.io.Out },
		Fork: func(cmd *cobra.Command, profile string, names []string) ([]clicore.ForkedAttempt, error) {
			ctx, cancel := context.WithTimeout(cmd.Context(), forkTimeout)
			defer cancel()
			return g.fork(ctx, profile, names)
		},
		List: func(cmd *cobra.Command, profile string) ([]clicore.AttemptInfo, error) {
			return g.listAttempts(cmd.Context(), profile)
		},
		Remove: func(cmd *cobra.Command, profile, name string) (clicore.RemovedAttempt, error) {
			ctx, cancel := context.WithTimeout(cmd.Context(), stopTimeout)
			defer cancel()
			return g.removeAttempt(ctx, profile, name)
		},
		Keep: func(cmd *cobra.Command, profile, name string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), forkTimeout)
			defer cancel()
			return g.keepAttempt(ctx, profile, name)
		},
		Review: g.attemptsReview,
	}
}

// forkJob is one `lazaret fork`: what it made so far, undone whole when
// a step fails (nothing half-made is left).
type forkJob struct {
	g       *globalOptions
	cfg     *config.Config
	p       *config.Profile
	src     *domain.Anchor // the sandbox forked (the workspace's, or an attempt's)
	repo    *gitrepo.HostRepo
	base    string
	running *ctl.Client // the source's coordinator, when it runs
	made    []*domain.Anchor
	locks   []*domainlock.Lock
	refs    []string // host refs created
	// pausedMillis is how long the running source was paused for its copy.
	pausedMillis int64
}

func (g *globalOptions) fork(ctx context.Context, profile string, names []string) (_ []clicore.ForkedAttempt, err error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	p, src, err := g.resolveDomain(cfg, profile, "")
	if err != nil {
		return nil, err
	}
	j := &forkJob{g: g, cfg: cfg, p: p, src: src}
	if err := j.check(ctx, names); err != nil {
		return nil, err
	}
	if err := g.refuseRoot(); err != nil { // the copies run podman
		return nil, err
	}
	defer func() {
		if err != nil {
			j.undo()
		}
		j.release()
	}()
	if err := j.sync(ctx); err != nil {
		return nil, err
	}
	for _, name := range names {
		if err := j.begin(ctx, name); err != nil {
			return nil, err
		}
	}
	if err := j.branches(ctx); err != nil {
		return nil, err
	}
	states, err := j.copyStates(ctx)
	if err != nil {
		return nil, err
	}
	return j.record(states)
}

// check refuses a fork that cannot be made, before anything is.
func (j *forkJob) check(ctx context.Context, names []string) error {
	mode, err := gitrepo.ResolveMode(j.p.GitMode, j.src.Workspace)
	if err != nil {
		return err
	}
	if mode != gitrepo.ModeBranch {
		return withHint(fmt.Errorf("fork: profile %s works on %s in direct mode, where every attempt would write the same files", j.p.Name, j.src.Workspace),
			exitUsage, "attempts need branch mode: the top level of a git repository and git_mode not \"direct\"")
	}
	if j.repo, err = gitrepo.OpenHostRepo(ctx, j.g.hostGit(), j.src.Workspace); err != nil {
		return err
	}
	have, err := attempt.List(j.src.Parent())
	if err != nil {
		return err
	}
	if n := len(have) + len(names); n > j.cfg.Attempts.Max {
		return withHint(fmt.Errorf("fork: %d attempts of profile %s in this workspace would be more than [attempts] max = %d (%d exist)", n, j.p.Name, j.cfg.Attempts.Max, len(have)),
			exitUsage, "remove some with `lazaret attempts rm NAME`, or raise max in [attempts] (docs/CONFIG.md)")
	}
	for _, name := range names {
		for _, h := range have {
			if h.Name == name {
				return withHint(fmt.Errorf("fork: attempt %s exists", name), exitUsage, "pick another name, or `lazaret attempts rm "+name+"` first")
			}
		}
		a, err := j.src.Parent().ForAttempt(name)
		if err != nil {
			return usageError{fmt.Errorf("fork: %w", err)}
		}
		if ref := gitrepo.RefMapOf(a).AgentRef(); j.repo.ResolveRef(ctx, j.g.hostGit(), ref) != "" {
			return withHint(fmt.Errorf("fork: the host already has %s", strings.TrimPrefix(ref, "refs/heads/")), exitUsage,
				"pick another name, or delete that branch (git branch -D) if you no longer need it")
		}
	}
	return nil
}

// sync brings a running source's commits to the host (so that the
// attempts begin at its last commit) and picks their base commit.
func (j *forkJob) sync(ctx context.Context) error {
	c, err := j.g.domainClient(j.src).dial(ctx)
	switch {
	case err == nil:
		j.running = c
		if err := c.GitSync(ctx); err != nil {
			return fmt.Errorf("fork: bringing the running sandbox's commits to the host: %w", err)
		}
	case !errors.Is(err, connect.ErrNotRunning):
		return err
	}
	g := j.g.hostGit()
	j.base = j.repo.ResolveRef(ctx, g, gitrepo.RefMapOf(j.src).AgentRef())
	if j.base == "" {
		if j.base, err = j.repo.Head(ctx, g); err != nil {
			return fmt.Errorf("fork: the agent branch %s does not exist and HEAD is not a commit: %w", j.src.AgentBranch(), err)
		}
	}
	return nil
}

// begin makes attempt name's Domain Root and holds its lock while the
// fork makes it.
func (j *forkJob) begin(ctx context.Context, name string) error {
	a, err := j.src.Parent().ForAttempt(name)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(a.Root()); err == nil {
		return withHint(fmt.Errorf("fork: %s exists without an attempt record (an interrupted fork or rm)", a.Root()), exitUsage,
			"`lazaret attempts rm "+name+"` removes it")
	}
	if err := domain.EnsurePrivateDir(a.Root()); err != nil {
		return err
	}
	j.made = append(j.made, a)
	lock, err := domainlock.Open(a.LockFile())
	if err != nil {
		return err
	}
	j.locks = append(j.locks, lock)
	if ok, err := lock.TryLock(); err != nil || !ok {
		return errors.Join(fmt.Errorf("fork: attempt %s is being made or started elsewhere", name), err)
	}
	return nil
}

// branches creates every attempt's agent branch at the base and copies
// the source's side branches, in one transaction.
func (j *forkJob) branches(ctx context.Context) error {
	g := j.g.hostGit()
	sides, err := gitrepo.ListSideBranches(ctx, g, j.repo, gitrepo.RefMapOf(j.src))
	if err != nil {
		return err
	}
	var tx strings.Builder
	tx.WriteString("start\n")
	var refs []string
	for _, a := range j.made {
		m := gitrepo.RefMapOf(a)
		fmt.Fprintf(&tx, "create %s %s\n", m.AgentRef(), j.base)
		refs = append(refs, m.AgentRef())
		for _, b := range sides {
			fmt.Fprintf(&tx, "create %s%s %s\n", m.SideRefPrefix(), b.Name, b.Tip)
			refs = append(refs, m.SideRefPrefix()+b.Name)
		}
	}
	tx.WriteString("commit\n")
	if err := g.UpdateRefs(ctx, j.repo.Common(), "lazaret fork: attempt branch created", strings.NewReader(tx.String())); err != nil {
		return fmt.Errorf("fork: creating the attempts' branches: %w", err)
	}
	j.refs = refs
	return nil
}

// copyStates copies the persistent dirs into each attempt: the first
// from the source (paused by its coordinator when it runs, else under
// its domain lock and the profile's shared lock), the others from the
// first (nothing else writes it).
func (j *forkJob) copyStates(ctx context.Context) ([]statestore.ForkResult, error) {
	out := make([]statestore.ForkResult, len(j.made))
	if len(j.p.PersistentDirs) == 0 {
		return out, nil
	}
	first, err := j.copyFromSource(ctx)
	if err != nil {
		return nil, err
	}
	out[0] = first
	pc := j.g.podmanClient()
	from := statestore.ForkSource{Store: statestore.Locate(j.made[0], j.p.Persist), Dirs: j.p.PersistentDirs}
	for i := 1; i < len(j.made); i++ {
		res, err := statestore.Fork(ctx, pc, from, statestore.Locate(j.made[i], j.p.Persist))
		if err != nil {
			return nil, fmt.Errorf("fork: copying the persistent dirs into attempt %s: %w", j.made[i].Attempt, err)
		}
		res.Layers = first.Layers
		out[i] = res
	}
	return out, nil
}

func (j *forkJob) copyFromSource(ctx context.Context) (statestore.ForkResult, error) {
	dst := statestore.Locate(j.made[0], j.p.Persist)
	if j.running != nil {
		st, err := j.running.ForkState(ctx, ctl.ForkStateRequest{Attempt: j.made[0].Attempt})
		if err != nil {
			return statestore.ForkResult{}, fmt.Errorf("fork: copying the running sandbox's persistent dirs: %w", err)
		}
		j.pausedMillis = st.PausedMillis
		return statestore.ForkResult{Mode: st.Mode, Bytes: st.Bytes, Layers: st.Layers}, nil
	}
	var res statestore.ForkResult
	err := j.g.domainClient(j.src).maintain(ctx, false, func() error {
		src := statestore.ForkSource{Store: statestore.Locate(j.src, j.p.Persist), Dirs: j.p.PersistentDirs}
		if src.Store.Shared {
			lock, err := statestore.ShareProfile(src.Store.Root, 30*time.Second)
			if err != nil {
				return err
			}
			defer lock.Close()
		}
		var err error
		res, err = statestore.Fork(ctx, j.g.podmanClient(), src, dst)
		return err
	})
	if errors.Is(err, errCoordinatorLive) || errors.Is(err, errDomainLocked) {
		return res, withHint(errors.New("fork: the sandbox started while the fork began"), exitUsage, "run the fork again")
	}
	if err != nil {
		return res, fmt.Errorf("fork: copying the persistent dirs: %w", err)
	}
	return res, nil
}

// record writes each attempt's record: from now on it exists.
func (j *forkJob) record(states []statestore.ForkResult) ([]clicore.ForkedAttempt, error) {
	out := make([]clicore.ForkedAttempt, len(j.made))
	for i, a := range j.made {
		st := states[i]
		r := attempt.Record{Name: a.Attempt, Profile: a.Profile, Workspace: a.Workspace, Hash: a.Hash, Parent: j.src.Hash,
			Created: time.Now().UTC(), Base: j.base, Running: j.running != nil, State: st.Mode, StateBytes: st.Bytes, Layers: st.Layers}
		if err := attempt.Write(a, r); err != nil {
			return nil, err
		}
		out[i] = clicore.ForkedAttempt{Name: a.Attempt, Branch: a.AgentBranch(), Base: j.base, State: st.Mode, StateBytes: st.Bytes}
		if i == 0 {
			out[i].PausedMillis = j.pausedMillis
		}
	}
	return out, nil
}

// undo removes what the fork made: the branches, the Domain Roots (the
// copies hold the sandbox's sub-uids' files: removed as root of podman's
// user namespace) and the records.
func (j *forkJob) undo() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if len(j.refs) > 0 {
		var tx strings.Builder
		for _, r := range j.refs {
			fmt.Fprintf(&tx, "delete %s\n", r)
		}
		if err := j.g.hostGit().UpdateRefs(ctx, j.repo.Common(), "lazaret fork: undone", strings.NewReader(tx.String())); err != nil {
			j.g.log.Warn("fork: removing the attempts' branches", "err", err)
		}
	}
	fs := overlayfs.New(j.g.podmanClient())
	for _, a := range j.made {
		if err := fs.RemoveAll(ctx, a.Root()); err != nil {
			j.g.log.Warn("fork: removing a half-made attempt", "root", a.Root(), "err", err)
		}
	}
}

func (j *forkJob) release() {
	for _, l := range j.locks {
		_ = l.Close()
	}
	if j.running != nil {
		_ = j.running.Close()
	}
}
