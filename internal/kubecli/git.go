package kubecli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/refsync"
	"github.com/lazaret-dev/lazaret/internal/execx"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// A cluster sandbox cannot share the host repository's objects as the
// local Git Sentry's clone does: its /workspace is seeded from a bundle of
// the host's agent and side branches (refsync.Seed) on the first command,
// and the agent's branches come back the way they do locally
// (refsync.Syncer: the branch list and a bundle out of the pod, every
// object verified by host git, only lazaret's refs moved) when a command
// ends and on `lazaret --backend kubernetes sync`.

// gitTimeout bounds one seed or sync through the API server.
const gitTimeout = 10 * time.Minute

// podSandbox is the ref sync's way into a pod's agent container: the API
// server's exec.
type podSandbox struct {
	c   *kube.Client
	pod string
}

func (s podSandbox) Name() string { return "pod/" + s.pod }

func (s podSandbox) Start(ctx context.Context, argv []string) (*refsync.Proc, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tail := &execx.TailBuffer{Max: 64 << 10}
	done := make(chan error, 1)
	go func() {
		code, err := s.c.ExecIn(ctx, kube.ExecRequest{Pod: s.pod, Container: kubespec.ContainerName,
			Command: argv, Stdin: inR, Stdout: outW, Stderr: tail})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit status %d", code)
		}
		_ = outW.Close()
		_ = inR.Close()
		done <- err
	}()
	var waited error
	once := false
	wait := func() error {
		if !once {
			once, waited = true, <-done
		}
		return waited
	}
	return &refsync.Proc{Stdin: inW, Stdout: outR, Stderr: tail, Wait: wait}, nil
}

// gitTarget is the host repository and ref names of t when its profile
// runs in branch mode (the workspace is a git repository and git_mode is
// not "direct"); nil otherwise.
type gitTarget struct {
	git  *hostgit.Git
	repo *gitrepo.HostRepo
	refs gitrepo.RefMap
	// audit records refused branch names and commits whose text hides
	// characters in the domain's trail.
	audit refsync.AuditFunc
}

func (g *globals) gitTarget(ctx context.Context, cfg *config.Config, t *target) (*gitTarget, error) {
	mode, err := gitrepo.ResolveMode(t.profile.GitMode, t.workspace)
	if err != nil {
		return nil, clicore.UsageError{Err: err}
	}
	if mode != gitrepo.ModeBranch {
		return nil, nil
	}
	hg := &hostgit.Git{}
	repo, err := gitrepo.OpenHostRepo(ctx, hg, t.workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", t.workspace, err)
	}
	return &gitTarget{git: hg, repo: repo, refs: gitrepo.RefMap{Profile: t.profile.Name, Attempt: t.attempt}, audit: g.auditTo(cfg, t)}, nil
}

// seed gives the pod its clone when it has none.
func (g *globals) seed(ctx context.Context, c *kube.Client, pod string, gt *gitTarget) error {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	seeded, start, err := refsync.Seed(ctx, gt.git, gt.repo, gt.refs, podSandbox{c: c, pod: pod})
	if err != nil {
		return fmt.Errorf("the sandbox's clone of %s: %w", gt.repo.TopLevel, err)
	}
	if seeded {
		g.log.Info("the sandbox's clone starts at "+short(start)+" on branch "+gt.refs.AgentBranch(), "pod", pod)
	}
	return nil
}

// sync brings the pod's branches into the host repository and says what
// moved.
func (g *globals) sync(ctx context.Context, c *kube.Client, pod string, gt *gitTarget) (*refsync.SyncResult, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	s := &refsync.Syncer{Git: gt.git, Repo: gt.repo, Map: gt.refs, Sandbox: podSandbox{c: c, pod: pod}, Log: g.log, Audit: gt.audit}
	defer s.Close()
	res, err := s.Sync(ctx)
	if err != nil {
		return nil, fmt.Errorf("syncing the agent's branches from pod %s: %w", pod, err)
	}
	for _, l := range res.Skipped {
		_, name := refsync.SkippedRef(l)
		g.log.Warn("not synced: a branch name lazaret refuses", "branch", visible.Line(name))
	}
	return res, nil
}

// syncAfter is the sync when a command ends: a failure is reported, not
// the command's exit code.
func (g *globals) syncAfter(c *kube.Client, pod string, gt *gitTarget) {
	if gt == nil {
		return
	}
	if _, err := g.sync(context.Background(), c, pod, gt); err != nil && !errors.Is(err, context.Canceled) {
		g.log.Warn("the agent's branches were not synced to the host; `lazaret --backend kubernetes sync` tries again", "err", err)
	}
}

func short(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return oid
}
