package kubecli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/engine/attempt"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// The attempts verbs of lazaret-kube: clicore's fork and attempts
// (arguments, names, printing) over the cluster's attempts (fork.go).
// The records are on this machine as for local attempts
// (internal/engine/attempt, Backend "kubernetes"); the branches are the
// host's, so diff and merge are the local CLI's.

func (g *globals) attemptsSpec() clicore.AttemptsSpec {
	return clicore.AttemptsSpec{
		Out:        func() io.Writer { return g.io.Out },
		Invocation: invocation,
		Fork: func(cmd *cobra.Command, profile string, names []string) ([]clicore.ForkedAttempt, error) {
			return g.runFork(cmd.Context(), profile, names)
		},
		List: func(cmd *cobra.Command, profile string) ([]clicore.AttemptInfo, error) {
			return g.listAttempts(cmd.Context(), profile)
		},
		Remove: func(cmd *cobra.Command, profile, name string) (clicore.RemovedAttempt, error) {
			return g.removeAttempt(cmd.Context(), profile, name)
		},
		Keep: func(cmd *cobra.Command, profile, name string) error {
			return g.keepAttempt(cmd.Context(), profile, name)
		},
		Review: func(cmd *cobra.Command, verb string, args []string) error {
			return g.reviewAttempts(cmd.Context(), verb, args)
		},
		Setup: g.setupAttempts,
	}
}

// setupAttempts adds lazaret-kube's flags: --timeout for the copies of
// fork and keep. fork's -n is the count, as in the local CLI: the
// namespace is --namespace there (a local flag of fork sharing the
// global one's value, so that cobra does not merge the global -n in).
func (g *globals) setupAttempts(cmd *cobra.Command) {
	switch cmd.Name() {
	case "fork":
		ns := pflag.NewFlagSet("fork", pflag.ContinueOnError)
		ns.StringVar(&g.namespace, "namespace", "", "namespace (default [cluster].namespace, else the context's; -n is the count here)")
		cmd.Flags().AddFlagSet(ns)
		cmd.Flags().BoolVar(&g.noClone, "no-clone", false, "copy the persistent dirs with a pod even where the storage class is a CSI driver's that could clone the volume")
		fallthrough
	case "keep":
		cmd.Flags().DurationVar(&g.copyTimeout, "timeout", defaultCopyTimeout, "how long to wait for the copy of the persistent dirs")
	}
}

// noAttemptFlag refuses --attempt on the verbs that work on a
// workspace's attempts.
func (g *globals) noAttemptFlag(verb string) error {
	if g.attempt != "" {
		return clicore.UsageError{Err: fmt.Errorf("%s: --attempt: name the attempt as an argument", verb)}
	}
	return nil
}

// openAttemptOf resolves profile's target in this workspace and its
// cluster attempt name.
func (g *globals) openAttemptOf(profile, name, verb string) (*clusterAttempt, error) {
	if err := g.noAttemptFlag("attempts " + verb); err != nil {
		return nil, err
	}
	cfg, c, t, err := g.clientFor(profile)
	if err != nil {
		return nil, err
	}
	parent, err := g.anchorOf(cfg, t)
	if err != nil {
		return nil, err
	}
	a, err := openClusterAttempt(parent, name)
	if err != nil {
		return nil, err
	}
	return &clusterAttempt{c: c, t: t, a: a, at: &target{profile: t.profile, workspace: t.workspace, hash: a.Hash, attempt: a.Attempt}}, nil
}

// clusterAttempt is one attempt: the parent's target, the attempt's
// Anchor and its own target.
type clusterAttempt struct {
	c  *kube.Client
	t  *target
	a  *domain.Anchor
	at *target
}

func (g *globals) listAttempts(ctx context.Context, profile string) ([]clicore.AttemptInfo, error) {
	if err := g.noAttemptFlag("attempts"); err != nil {
		return nil, err
	}
	cfg, c, t, err := g.clientFor(profile)
	if err != nil {
		return nil, err
	}
	parent, err := g.anchorOf(cfg, t)
	if err != nil {
		return nil, err
	}
	recs, err := attempt.List(parent)
	if err != nil {
		return nil, err
	}
	claims, err := c.Claims(ctx, kubespec.ManagedSelector+","+kubespec.LabelProfile+"="+t.profile.Name)
	if err != nil {
		return nil, err
	}
	ready := map[string]bool{}
	for i := range claims {
		ready[claims[i].Labels[kubespec.LabelDomain]] = claims[i].DeletionTimestamp == nil && claimState(&claims[i]) == "Ready"
	}
	gt, err := g.gitTarget(ctx, cfg, t)
	if err != nil {
		return nil, err
	}
	var out []clicore.AttemptInfo
	for _, r := range recs {
		if r.Backend != attempt.BackendKubernetes {
			continue
		}
		m := gitrepo.RefMap{Profile: r.Profile, Attempt: r.Name}
		info := clicore.AttemptInfo{Name: r.Name, Branch: m.AgentBranch(), Running: ready[r.Hash], Bytes: r.StateBytes, Created: r.Created, State: r.State}
		if gt != nil {
			if head := gt.repo.ResolveRef(ctx, gt.git, m.AgentRef()); head != "" {
				info.Head, info.Subject = head, commitSubject(ctx, gt, head)
			}
		}
		out = append(out, info)
	}
	return out, nil
}

// commitSubject is the subject of commit oid ("" when it cannot be
// read): the agent's text, which the printing escapes.
func commitSubject(ctx context.Context, gt *gitTarget, oid string) string {
	subject, err := gt.git.Subject(ctx, gt.repo.TopLevel, oid)
	if err != nil {
		return ""
	}
	return subject
}

// removeAttempt stops the attempt's sandbox and deletes its PVC, its
// branches and its record (with its Domain Root: its audit trail). The
// record goes last: a failure before leaves an attempt rm can take again.
func (g *globals) removeAttempt(ctx context.Context, profile, name string) (clicore.RemovedAttempt, error) {
	ca, err := g.openAttemptOf(profile, name, "rm")
	if err != nil {
		return clicore.RemovedAttempt{}, err
	}
	cfg, _ := g.loadConfig()
	gt, err := g.gitTarget(ctx, cfg, ca.at)
	if err != nil {
		return clicore.RemovedAttempt{}, err
	}
	if err := ca.c.Delete(ctx, kube.ClaimsGVR, kubespec.ClaimName(ca.a.Hash)); err != nil {
		return clicore.RemovedAttempt{}, err
	}
	for _, kind := range []string{"fork", "keep"} {
		if err := ca.c.DeletePod(ctx, kubespec.CopyPodName(kind, ca.a.Hash)); err != nil {
			return clicore.RemovedAttempt{}, err
		}
	}
	if err := ca.c.DeletePVC(ctx, kubespec.StateName(ca.a.Profile, ca.a.Hash)); err != nil {
		return clicore.RemovedAttempt{}, err
	}
	res := clicore.RemovedAttempt{Branch: ca.a.AgentBranch()}
	if gt != nil {
		if res.Tip, err = deleteAttemptRefs(ctx, gt); err != nil {
			return clicore.RemovedAttempt{}, err
		}
	}
	if err := os.Remove(ca.a.AttemptRecord()); err != nil {
		return clicore.RemovedAttempt{}, err
	}
	return res, os.RemoveAll(ca.a.Root())
}

// deleteAttemptRefs deletes the attempt's refs on the host (its agent
// branch, its side branches, reset-branch's old tips) in one transaction
// and returns the agent branch's tip. A branch checked out on the host is
// the user's: refused.
func deleteAttemptRefs(ctx context.Context, gt *gitTarget) (string, error) {
	m := gt.refs
	out, err := gt.git.ForEachRef(ctx, gt.repo.Common(), m.AgentRef(), strings.TrimSuffix(m.SideRefPrefix(), "/heads/"))
	if err != nil {
		return "", err
	}
	if out == "" {
		return "", nil
	}
	if co, err := gt.repo.CheckedOutBranches(ctx, gt.git); err == nil && co[m.AgentBranch()] {
		return "", clicore.UsageError{Err: fmt.Errorf("attempts rm: branch %s is checked out on the host: check out another branch first", m.AgentBranch())}
	}
	tip := ""
	var tx strings.Builder
	for _, l := range strings.Split(out, "\n") {
		oid, ref, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		if ref == m.AgentRef() {
			tip = oid
		}
		tx.WriteString("delete " + ref + " " + oid + "\n")
	}
	if err := gt.git.UpdateRefs(ctx, gt.repo.Common(), "lazaret attempts rm", strings.NewReader(tx.String())); err != nil {
		return "", fmt.Errorf("deleting the attempt's branches: %w", err)
	}
	return tip, nil
}

// reviewAttempts hands `attempts diff|merge` to the local CLI (the
// branches are the host's), after syncing the named attempts' running
// sandboxes as the other review verbs do.
func (g *globals) reviewAttempts(ctx context.Context, verb string, args []string) error {
	if err := g.noAttemptFlag("attempts " + verb); err != nil {
		return err
	}
	profile, names := reviewedAttempts(verb, args)
	for _, n := range names {
		if !g.isClusterAttempt(profile, n) {
			continue
		}
		g.attempt = n
		if _, err := g.runSync(ctx, profile, false); err != nil {
			g.log.Warn("showing what the host has: the sync failed", "attempt", n, "err", err)
		}
	}
	g.attempt = ""
	return g.execLocal(append([]string{"attempts", verb}, args...))
}

// reviewedAttempts reads `diff [PROFILE] A B …` and `merge [PROFILE]
// NAME …`: the positional words before the first flag.
func reviewedAttempts(verb string, args []string) (string, []string) {
	var pos []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		pos = append(pos, a)
	}
	want := 1
	if verb == "diff" {
		want = 2
	}
	if len(pos) < want {
		return "", nil
	}
	if len(pos) > want {
		return pos[0], pos[len(pos)-want:]
	}
	return "", pos
}

// isClusterAttempt says whether name is a cluster attempt of profile in
// this workspace (a local one has no pod to sync).
func (g *globals) isClusterAttempt(profile, name string) bool {
	cfg, err := g.loadConfig()
	if err != nil {
		return false
	}
	t, err := g.resolve(cfg, profile)
	if err != nil {
		return false
	}
	parent, err := g.anchorOf(cfg, t)
	if err != nil {
		return false
	}
	_, err = openClusterAttempt(parent, name)
	return err == nil
}

// keepAttempt makes the attempt's persistent dirs the profile's (its
// State Anchor scope's: the profile's PVC, or the workspace's with
// persist = "workspace"): copied back into that PVC, replacing what it
// held. A PVC's name is what every template mounts and a PVC cannot be
// renamed, so the content moves, not the volume. The attempt must be
// stopped and no sandbox may mount the destination.
func (g *globals) keepAttempt(ctx context.Context, profile, name string) error {
	ca, err := g.openAttemptOf(profile, name, "keep")
	if err != nil {
		return err
	}
	cfg, _ := g.loadConfig()
	in := stateInput(cfg, ca.t)
	if in == nil {
		return clicore.UsageError{Err: fmt.Errorf("attempts keep: profile %s has no persistent dirs: nothing to keep", ca.t.profile.Name)}
	}
	if cl, err := ca.c.Claim(ctx, kubespec.ClaimName(ca.a.Hash)); err == nil && cl.DeletionTimestamp == nil {
		return refusal{msg: fmt.Sprintf("attempts keep %s: %v", name, clicore.ErrAttemptRunning),
			hint: "stop it first (`" + invocation + " stop --attempt " + name + "`)"}
	} else if err != nil && !errors.Is(err, kube.ErrNotFound) {
		return err
	}
	if err := stateFree(ctx, ca.c, ca.t, in.DomainHash != ""); err != nil {
		return err
	}
	src := kubespec.StateName(ca.a.Profile, ca.a.Hash)
	if _, err := ca.c.PVC(ctx, src); errors.Is(err, kube.ErrNotFound) {
		return clicore.UsageError{Err: fmt.Errorf("attempts keep: attempt %s has no persistent dirs' volume (its parent had none and it never ran): nothing to keep", name)}
	} else if err != nil {
		return err
	}
	if err := g.ensureState(ctx, cfg, ca.c, ca.t); err != nil {
		return err
	}
	dest := kubespec.StateName(in.Profile, in.DomainHash)
	_, err = g.runCopies(ctx, ca.c, []kubespec.CopyInput{{Kind: "keep", Hash: ca.a.Hash, Profile: ca.a.Profile, Attempt: name,
		Image: ca.t.profile.Image, ImagePullPolicy: cfg.Cluster.ImagePullPolicy, RuntimeClass: cfg.Cluster.RuntimeClass,
		Source: src, Dest: dest, Mode: kubespec.CopyReplace}}, g.copyTimeout)
	if err != nil {
		return fmt.Errorf("attempts keep: %w", err)
	}
	return nil
}

// stateFree refuses while a sandbox mounts t's State Anchor scope: the
// workspace's own claim, and with a profile's PVC (perWorkspace false)
// any other workspace's of the profile (attempts mount their own).
func stateFree(ctx context.Context, c *kube.Client, t *target, perWorkspace bool) error {
	if cl, err := c.Claim(ctx, kubespec.ClaimName(t.hash)); err == nil && cl.DeletionTimestamp == nil {
		return refusal{msg: fmt.Sprintf("attempts keep: the sandbox of profile %s for %s runs (claim %s): its persistent dirs are in use", t.profile.Name, visible.Line(t.workspace), cl.Name),
			hint: "stop it first (`" + invocation + " stop " + t.profile.Name + "`)"}
	} else if err != nil && !errors.Is(err, kube.ErrNotFound) {
		return err
	}
	if perWorkspace {
		return nil
	}
	return sharedStateFree(ctx, c, t)
}
