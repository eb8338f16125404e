package kubecli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/attempt"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// `lazaret --backend kubernetes fork`: each attempt of the workspace's
// cluster sandbox is a Domain Anchor of its own (its claim, its in-memory
// Trust Anchor and session keys at each session, its agent branch) with
// a PVC of its own holding a copy of its parent's persistent dirs. The
// parent's commits reach the host first (a running pod is synced), the
// attempts' branches start at its agent branch's tip, then the PVCs are
// made and filled, and the records are written last: an attempt exists
// when its record does. A failure removes what the fork made.

// forkJob is one fork in the making and what it made so far.
type forkJob struct {
	g      *globals
	cfg    *config.Config
	c      *kube.Client
	t      *target
	parent *domain.Anchor
	as     []*domain.Anchor
	gt     *gitTarget
	// pod is the parent's when it runs.
	pod  *running
	base string
	// What was made, undone on failure: "ref oid" of each created ref,
	// the PVCs, the attempts whose records were written.
	refs    []string
	pvcs    []string
	records []*domain.Anchor
}

// runFork makes the attempts names of profile's sandbox in this workspace.
func (g *globals) runFork(ctx context.Context, profile string, names []string) ([]clicore.ForkedAttempt, error) {
	if g.attempt != "" {
		return nil, clicore.UsageError{Err: errors.New("fork: --attempt: an attempt is not forked again; fork the workspace's sandbox")}
	}
	cfg, c, t, err := g.clientFor(profile)
	if err != nil {
		return nil, err
	}
	parent, err := g.anchorOf(cfg, t)
	if err != nil {
		return nil, err
	}
	as, err := forkTargets(cfg, parent, names)
	if err != nil {
		return nil, err
	}
	gt, err := g.gitTarget(ctx, cfg, t)
	if err != nil {
		return nil, err
	}
	j := &forkJob{g: g, cfg: cfg, c: c, t: t, parent: parent, as: as, gt: gt}
	began := time.Now()
	out, err := j.run(ctx)
	if err != nil {
		if uerr := j.undo(); uerr != nil {
			return nil, fmt.Errorf("fork: %w; undoing it: %v", err, uerr)
		}
		return nil, fmt.Errorf("fork: %w", err)
	}
	g.log.Info("forked", "attempts", len(out), "took", time.Since(began).Round(time.Millisecond))
	return out, nil
}

// forkTargets are the attempts' Anchors: none may exist yet, and with
// the ones there are they stay within [attempts] max.
func forkTargets(cfg *config.Config, parent *domain.Anchor, names []string) ([]*domain.Anchor, error) {
	existing, err := attempt.List(parent)
	if err != nil {
		return nil, err
	}
	if n := len(existing) + len(names); n > cfg.Attempts.Max {
		return nil, clicore.WithHint(fmt.Errorf("fork: %d new attempt(s) of profile %s beside the %d there are make %d, over [attempts] max = %d",
			len(names), parent.Profile, len(existing), n, cfg.Attempts.Max), exitcode.Usage,
			"remove some (`"+invocation+" attempts rm NAME`), or raise max in [attempts]")
	}
	as := make([]*domain.Anchor, len(names))
	for i, name := range names {
		a, err := parent.ForAttempt(name)
		if err != nil {
			return nil, clicore.UsageError{Err: fmt.Errorf("fork: %w", err)}
		}
		if _, err := attempt.Read(a); err == nil {
			return nil, clicore.WithHint(fmt.Errorf("fork: attempt %q of profile %s already exists", name, parent.Profile), exitcode.Usage, attemptsHint)
		} else if !errors.Is(err, attempt.ErrNotFound) {
			return nil, err
		}
		as[i] = a
	}
	return as, nil
}

func (j *forkJob) run(ctx context.Context) ([]clicore.ForkedAttempt, error) {
	if err := j.syncParent(ctx); err != nil {
		return nil, err
	}
	if err := j.branches(ctx); err != nil {
		return nil, err
	}
	st, err := j.copyState(ctx)
	if err != nil {
		return nil, err
	}
	return j.writeRecords(st)
}

// syncParent finds the parent's running pod and brings its commits to
// the host: every commit made before the fork is in the attempts.
func (j *forkJob) syncParent(ctx context.Context) error {
	claim, err := j.c.Claim(ctx, kubespec.ClaimName(j.t.hash))
	if errors.Is(err, kube.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if claim.Status.Sandbox.Name == "" || claim.DeletionTimestamp != nil {
		return nil
	}
	r, err := j.g.podOf(ctx, j.c, claim)
	if err != nil {
		return err
	}
	j.pod = r
	if j.gt == nil {
		return nil
	}
	_, err = j.g.sync(ctx, j.c, r.pod, j.gt)
	return err
}

// branches creates each attempt's agent branch at the parent's agent
// branch tip (the host's HEAD when the parent never ran) and copies the
// parent's side branches under the attempt's prefix, in one transaction.
func (j *forkJob) branches(ctx context.Context) error {
	if j.gt == nil {
		return nil
	}
	git, repo, pm := j.gt.git, j.gt.repo, j.gt.refs
	base := repo.ResolveRef(ctx, git, pm.AgentRef())
	if base == "" {
		head, err := repo.Head(ctx, git)
		if err != nil {
			return fmt.Errorf("the host repository's HEAD, where the attempts' branches start: %w", err)
		}
		base = head
	}
	sides, err := gitrepo.ListSideBranches(ctx, git, repo, pm)
	if err != nil {
		return err
	}
	var refs []string
	for _, a := range j.as {
		m := gitrepo.RefMapOf(a)
		if tip := repo.ResolveRef(ctx, git, m.AgentRef()); tip != "" {
			return clicore.WithHint(fmt.Errorf("branch %s already exists (at %s)", m.AgentBranch(), short(tip)), exitcode.Usage,
				"choose another name, or delete the branch (`git branch -D "+m.AgentBranch()+"`)")
		}
		refs = append(refs, m.AgentRef()+" "+base)
		for _, s := range sides {
			if gitrepo.ValidBranch(s.Name) != nil {
				j.g.log.Warn("fork: a side branch lazaret would not sync is not copied", "branch", visible.Line(s.Name))
				continue
			}
			refs = append(refs, m.SideRefPrefix()+s.Name+" "+s.Tip)
		}
	}
	var tx strings.Builder
	for _, r := range refs {
		tx.WriteString("create " + r + "\n")
	}
	if err := git.UpdateRefs(ctx, repo.Common(), "lazaret fork", strings.NewReader(tx.String())); err != nil {
		return fmt.Errorf("creating the attempts' branches: %w", err)
	}
	j.refs, j.base = refs, base
	return nil
}

// copyState gives each attempt a PVC of its own with the parent's
// persistent dirs in it (nil: the profile has none, or the parent's
// volume was never made: each attempt's is seeded from the image at its
// first start).
func (j *forkJob) copyState(ctx context.Context) ([]copied, error) {
	in := stateInput(j.cfg, j.t)
	if in == nil {
		return nil, nil
	}
	srcName := kubespec.StateName(in.Profile, in.DomainHash)
	src, err := j.c.PVC(ctx, srcName)
	if errors.Is(err, kube.ErrNotFound) {
		j.g.log.Info("the parent has no persistent dirs' volume yet: each attempt's starts from the image", "pvc", srcName)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if src.DeletionTimestamp != nil {
		return nil, fmt.Errorf("the persistent dirs' volume claim %s is being deleted", srcName)
	}
	node := j.flushParent(ctx)
	clone := !j.g.noClone && canClone(ctx, j.c, src)
	var ins []kubespec.CopyInput
	for _, a := range j.as {
		dest, err := j.attemptPVC(ctx, a, src, clone)
		if err != nil {
			return nil, err
		}
		ins = append(ins, kubespec.CopyInput{Kind: "fork", Hash: a.Hash, Profile: a.Profile, Attempt: a.Attempt,
			Image: j.t.profile.Image, ImagePullPolicy: j.cfg.Cluster.ImagePullPolicy, RuntimeClass: j.cfg.Cluster.RuntimeClass,
			Source: srcName, Dest: dest, Mode: kubespec.CopyNew, Node: node})
	}
	began := time.Now()
	st, err := j.g.runCopies(ctx, j.c, ins, j.g.copyTimeout)
	if err == nil {
		j.g.log.Info("copied the persistent dirs", "attempts", len(st), "clone", clone, "took", time.Since(began).Round(time.Millisecond))
	}
	return st, err
}

// attemptPVC makes attempt a's PVC: src's class and size, a clone of it
// when the class can.
func (j *forkJob) attemptPVC(ctx context.Context, a *domain.Anchor, src *corev1.PersistentVolumeClaim, clone bool) (string, error) {
	size := src.Spec.Resources.Requests[corev1.ResourceStorage]
	in := kubespec.StateInput{Profile: a.Profile, DomainHash: a.Hash, Workspace: a.Workspace, Size: size.String(), Attempt: a.Attempt}
	if src.Spec.StorageClassName != nil {
		in.StorageClass = *src.Spec.StorageClassName
	}
	if clone {
		in.CloneFrom = src.Name
	}
	pvc, err := kubespec.StatePVC(in)
	if err != nil {
		return "", err
	}
	_, created, err := j.c.EnsurePVC(ctx, pvc)
	if err != nil {
		return "", err
	}
	if !created {
		return "", setupError{fmt.Errorf("the volume claim %s of attempt %s already exists", pvc.Name, a.Attempt),
			"an attempt of that name removed a moment ago leaves it until its pod has gone: fork again in a moment (or `kubectl delete pvc " + pvc.Name + "`)"}
	}
	j.pvcs = append(j.pvcs, pvc.Name)
	return pvc.Name, nil
}

// flushParent, when the parent runs, asks its pod to write what it holds
// (sync) and returns its node: the copy pods must run there, where the
// ReadWriteOnce volume is attached. Its processes go on: a pod cannot be
// paused through the API, so the copy is of a live volume.
func (j *forkJob) flushParent(ctx context.Context) string {
	if j.pod == nil {
		return ""
	}
	if _, err := j.c.ExecIn(ctx, kube.ExecRequest{Pod: j.pod.pod, Container: kubespec.ContainerName, Command: []string{"sh", "-c", "sync"}}); err != nil {
		j.g.log.Debug("sync in the parent's pod", "err", err)
	}
	p, err := j.c.Pod(ctx, j.pod.pod)
	if err != nil {
		j.g.log.Debug("the parent's pod", "err", err)
		return ""
	}
	return p.Spec.NodeName
}

// writeRecords writes each attempt's record, the last thing a fork does.
func (j *forkJob) writeRecords(st []copied) ([]clicore.ForkedAttempt, error) {
	now := j.g.now()
	out := make([]clicore.ForkedAttempt, 0, len(j.as))
	for i, a := range j.as {
		r := attempt.Record{Name: a.Attempt, Profile: a.Profile, Workspace: a.Workspace, Hash: a.Hash, Parent: j.parent.Hash,
			Created: now, Base: j.base, Running: j.pod != nil, Backend: attempt.BackendKubernetes}
		fa := clicore.ForkedAttempt{Name: a.Attempt, Branch: a.AgentBranch(), Base: j.base}
		if st != nil {
			r.State, r.StateBytes = st[i].how, st[i].bytes
			fa.State, fa.StateBytes = st[i].how, st[i].bytes
		}
		if err := attempt.Write(a, r); err != nil {
			return nil, err
		}
		j.records = append(j.records, a)
		out = append(out, fa)
	}
	return out, nil
}

// undo removes what the fork made: records, PVCs, branches (the copy
// pods are gone already).
func (j *forkJob) undo() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []string
	for _, a := range j.records {
		if err := os.RemoveAll(a.Root()); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, n := range j.pvcs {
		if err := j.c.DeletePVC(ctx, n); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(j.refs) > 0 {
		var tx strings.Builder
		for _, r := range j.refs {
			tx.WriteString("delete " + r + "\n")
		}
		if err := j.gt.git.UpdateRefs(ctx, j.gt.repo.Common(), "lazaret fork undone", strings.NewReader(tx.String())); err != nil {
			errs = append(errs, "deleting the attempts' branches: "+err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
