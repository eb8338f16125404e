package gitsentry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/refsync"
)

// Component is the Git Sentry as a sandbox component: Prepare creates or
// reuses the agent clone and adds the mounts; Started begins the real-time
// ref sync; Close stops it after a last sync.
type Component struct {
	Anchor  *domain.Anchor
	GitMode string // the profile's git_mode
	Git     *hostgit.Git
	Podman  *podman.Client
	Log     *slog.Logger
	// Notices receives the few user-facing notes (uncommitted host changes
	// not carried over); nil sends them to the log.
	Notices io.Writer
	// FSMonitor is the lazaret-fsmonitor binary (found with locate when
	// empty); NoFSMonitor leaves git in the clone without it.
	FSMonitor   string
	NoFSMonitor bool
	// Audit receives the ref sync's audit entries (skipped branches,
	// flagged commits); nil logs them only.
	Audit refsync.AuditFunc
	// Isolated runs the ref sync's git in the sandbox under the isolating
	// session holder (escprompt.IsolatedCommand): that git is the image's,
	// which the agent may have replaced, and it must not run where it
	// could see the sessions' processes. Set when escalation (whose client
	// is the holder) is on.
	Isolated bool
	// WithChanges: a clone this start makes gets the host's uncommitted
	// changes (CloneOptions.WithChanges; --with-changes, with_changes).
	WithChanges bool

	mode      string
	fsmonitor bool // Prepare set it up
	repo      *gitrepo.HostRepo
	clone     *Clone // open from Prepare until finish
	syncer    *refsync.Syncer
	cancel    context.CancelFunc
	done      chan struct{}
	once      sync.Once
	mu        sync.Mutex // guards syncer and finished for SyncNow
	finished  bool       // the last sync ran
}

// New returns the Git Sentry component of anchor for a profile's git_mode.
func New(a *domain.Anchor, gitMode string, pc *podman.Client, log *slog.Logger) *Component {
	return &Component{Anchor: a, GitMode: gitMode, Git: &hostgit.Git{Log: log}, Podman: pc, Log: log}
}

// WithAudit sets the audit sink and returns c.
func (c *Component) WithAudit(f refsync.AuditFunc) *Component {
	c.Audit = f
	return c
}

// WithIsolation sets Isolated.
func (c *Component) WithIsolation(on bool) *Component {
	c.Isolated = on
	return c
}

// WithHostChanges sets WithChanges and returns c.
func (c *Component) WithHostChanges(on bool) *Component {
	c.WithChanges = on
	return c
}

// Name implements sandbox.Component.
func (c *Component) Name() string { return "gitsentry" }

// Mode is the mode Prepare chose ("" before Prepare).
func (c *Component) Mode() string { return c.mode }

func (c *Component) logger() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (c *Component) notice(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if c.Notices != nil {
		fmt.Fprintln(c.Notices, "lazaret: "+msg)
		return
	}
	c.logger().Warn("gitsentry: " + msg)
}

// Prepare implements sandbox.Component.
func (c *Component) Prepare(ctx context.Context, spec *podman.ContainerSpec) error {
	mode, err := gitrepo.ResolveMode(c.GitMode, c.Anchor.Workspace)
	if err != nil {
		return err
	}
	c.mode = mode
	if err := domain.EnsurePrivateDir(c.Anchor.Root()); err != nil {
		return err
	}
	if err := c.addIdentity(ctx, spec); err != nil {
		return err
	}
	if mode == gitrepo.ModeDirect {
		mounts := DirectMounts(c.Anchor.Workspace)
		spec.Mounts = append(spec.Mounts, mounts...)
		// The user edits the host directory while the sandbox runs: keep
		// revalidating access for it (and its .git) even if the runtime
		// runs with --file-access-mounts=exclusive.
		AddSharedHint(spec, DirectWorkspaceHintName, c.Anchor.Workspace)
		for _, m := range mounts {
			AddSharedHint(spec, DirectGitHintName, m.Source)
		}
		return nil
	}
	repo, err := gitrepo.OpenHostRepo(ctx, c.Git, c.Anchor.Workspace)
	if err != nil {
		return err
	}
	c.repo = repo
	clone, err := EnsureCloneWith(ctx, c.Git, repo, c.Anchor, c.notice, CloneOptions{WithChanges: c.WithChanges})
	if err != nil {
		return err
	}
	c.clone = clone
	cfg, err := WriteConfigFile(c.Anchor.Root(), repo.ObjectFormat)
	if err != nil {
		return fmt.Errorf("writing the agent clone's config: %w", err)
	}
	// podman and runsc reach the clone below the vault as root of the
	// user namespace; the mount source is its real path.
	spec.Mounts = append(spec.Mounts, BranchMounts(ClonePath(c.Anchor), cfg, repo.CommonDir)...)
	AddSharedHint(spec, HostGitHintName, repo.CommonDir)
	// Only in branch mode: nothing outside the sandbox writes the clone's
	// work tree while it runs (in direct mode the user does).
	c.prepareFSMonitor(spec)
	return nil
}

// EnsureClone creates the agent clone of anchor if it does not exist, or
// repairs the mount targets of an existing one, and returns it opened (see
// vault.go: the user's processes cannot reach it by path). A new clone
// starts at the host's agent branch if that exists (work kept across a
// deleted clone), else at the host's HEAD; the host branch is created to
// match.
func EnsureClone(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, a *domain.Anchor, notice func(string, ...any)) (*Clone, error) {
	return EnsureCloneWith(ctx, g, repo, a, notice, CloneOptions{})
}

// CloneOptions are the choices of a start about a clone it makes.
type CloneOptions struct {
	// WithChanges carries the host working tree's uncommitted changes
	// into a new clone (carry.go) when it starts at the host's HEAD; the
	// outcome is recorded in gitrepo.CarriedFile for the CLI's banner.
	// An existing clone is never touched: it may hold the agent's own
	// uncommitted work (the CLI refuses --with-changes then).
	WithChanges bool
}

// EnsureCloneWith is EnsureClone with the start's options.
func EnsureCloneWith(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, a *domain.Anchor, notice func(string, ...any), o CloneOptions) (*Clone, error) {
	v := a.AgentClone()
	if _, err := os.Lstat(v); err == nil {
		if err := sealVault(v); err != nil {
			return nil, err
		}
		c, err := OpenClone(v)
		if err == nil {
			if err := RepairClone(c.Path()); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	m := gitrepo.RefMapOf(a)
	start := repo.ResolveRef(ctx, g, m.AgentRef())
	head, err := repo.Head(ctx, g)
	if start == "" {
		if err != nil {
			return nil, err
		}
		start = head
		if dirty, err := repo.Dirty(ctx, g, true); err == nil && dirty != "" && !o.WithChanges {
			notice("the host working tree has uncommitted changes; they are not in the agent's clone, which starts at commit %s on branch %s", start[:12], m.AgentBranch())
		}
	}
	gitrepo.RemoveCarried(a.Root())
	tmp, err := buildClone(ctx, g, repo, a.Root(), m, start, notice)
	if err != nil {
		return nil, err
	}
	if o.WithChanges {
		if err := carryInto(ctx, g, repo, a, tmp, start, head, m); err != nil {
			_ = os.RemoveAll(tmp)
			return nil, err
		}
	}
	err = sealVault(v)
	if err == nil {
		err = adoptClone(v, tmp)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	// Create the host branch if missing (never move an existing one here).
	err = g.CreateLoggedRef(ctx, repo.Common(), "lazaret: agent branch created", m.AgentRef(), start)
	if err != nil && repo.ResolveRef(ctx, g, m.AgentRef()) == "" {
		return nil, fmt.Errorf("creating %s: %w", m.AgentRef(), err)
	}
	return OpenClone(v)
}

// FSMonitorStartDelay is how long after the container's start the
// fsmonitor daemon is started.
const FSMonitorStartDelay = 2 * time.Second

// Started implements sandbox.Component: in branch mode it syncs once and
// then watches the clone's refs for the life of the sandbox.
func (c *Component) Started(ctx context.Context, container string) error {
	if c.mode != gitrepo.ModeBranch {
		return nil
	}
	skipped := gitrepo.SkippedRefsFile(c.Anchor.Root())
	syncer := &refsync.Syncer{Git: c.Git, Repo: c.repo, Map: gitrepo.RefMapOf(c.Anchor),
		Sandbox: podmanSandbox{podman: c.Podman, container: container, isolated: c.Isolated}, Log: c.Log, Audit: c.Audit,
		WriteSkipped: func(list string) error { return writeMountedFile(skipped, list) },
		RefsDir:      c.clone.Path() + "/.git"}
	c.mu.Lock()
	c.syncer = syncer
	c.mu.Unlock()
	interval := pollInterval
	w, err := newRefWatcher(c.clone.Path() + "/.git")
	if err != nil {
		// No inotify (instances exhausted): poll often instead of failing
		// the start; commits then take up to a poll interval to show.
		c.logger().Warn("gitsentry: cannot watch the agent clone, polling", "err", err)
		interval = fallbackPollInterval
	}
	// The watcher outlives Started's context: it belongs to the sandbox.
	wctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	if c.fsmonitor {
		// Off the start path, and not at once: its podman exec (a few
		// hundred ms of CPU) would compete with the first session's own
		// on a small machine (measured on the cold start). Until the
		// daemon listens, git scans everything as it would without; the
		// first status after a start is a full scan anyway.
		go func() {
			select {
			case <-wctx.Done():
				return
			case <-time.After(FSMonitorStartDelay):
			}
			fctx, cancel := context.WithTimeout(wctx, time.Minute)
			defer cancel()
			if err := StartFSMonitor(fctx, c.Podman, container); err != nil && wctx.Err() == nil {
				c.logger().Warn("gitsentry: fsmonitor did not start, git status scans the whole clone", "err", err)
			}
		}()
	}
	kick := make(chan struct{}, 1)
	notify := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if w != nil {
		go w.run(wctx, notify)
	}
	go func() {
		defer close(c.done)
		watchLoop(wctx, kick, interval, c.syncOnce)
	}()
	notify()
	return nil
}

func (c *Component) syncOnce(ctx context.Context) {
	start := time.Now()
	res, err := c.syncer.Sync(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.logger().Warn("gitsentry: ref sync failed", "err", err)
		}
		return
	}
	if len(res.Updated)+len(res.Deleted) > 0 {
		c.logger().Info("gitsentry: synced", "updated", res.Updated, "deleted", res.Deleted, "took", time.Since(start))
	}
}

// SyncNow runs one ref sync and returns when it is done (ctl.TypeGitSync:
// a session whose command ended waits for it). A sync the watcher is
// running is waited for first (Syncer.mu), then this one sees everything
// committed before the call. Nothing to do in direct mode, before Started
// or after the last sync.
func (c *Component) SyncNow(ctx context.Context) error {
	c.mu.Lock()
	s, done := c.syncer, c.finished
	c.mu.Unlock()
	if s == nil || done {
		return nil
	}
	return s.SyncIfChanged(ctx)
}

// BeforeStop runs at teardown while the container still runs (the
// coordinator calls it before removing the container): stop the watcher
// and make a last sync, so commits made just before the end are on the
// host at once rather than at the next start.
func (c *Component) BeforeStop(ctx context.Context) { c.finish(ctx) }

// Close implements sandbox.Component. It is finish again (a no-op when
// BeforeStop ran); the last sync then fails harmlessly if the container is
// gone, and the next start's first sync catches up.
func (c *Component) Close(ctx context.Context) error {
	c.finish(ctx)
	return nil
}

func (c *Component) finish(ctx context.Context) {
	c.once.Do(func() {
		if c.clone != nil {
			defer c.clone.Close()
		}
		if c.cancel == nil {
			return
		}
		c.cancel()
		<-c.done
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := c.syncer.Sync(sctx); err != nil {
			c.logger().Debug("gitsentry: final sync", "err", err)
		}
		c.mu.Lock()
		c.finished = true
		c.mu.Unlock()
		c.syncer.Close()
	})
}
