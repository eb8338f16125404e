package kubecli

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// stateInput is the State Anchor scope of t on the cluster, as locally:
// the profile's (persist = "profile") or the Domain Anchor's (persist =
// "workspace"), an attempt's always its own (the copy its fork made);
// nil when the profile has no persistent dirs.
func stateInput(cfg *config.Config, t *target) *kubespec.StateInput {
	p := t.profile
	if len(p.PersistentDirs) == 0 {
		return nil
	}
	in := &kubespec.StateInput{Profile: p.Name, StorageClass: cfg.Cluster.StorageClass, Size: cfg.Cluster.StateSize}
	if p.Persist == config.PersistWorkspace || t.attempt != "" {
		in.DomainHash, in.Workspace, in.Attempt = t.hash, t.workspace, t.attempt
	}
	return in
}

// stateSpec is what the template mounts for t (nil: nothing).
func stateSpec(cfg *config.Config, t *target) *kubespec.State {
	in := stateInput(cfg, t)
	if in == nil {
		return nil
	}
	return &kubespec.State{Claim: kubespec.StateName(in.Profile, in.DomainHash), Dirs: t.profile.PersistentDirs}
}

// ensureState makes sure t's PVC exists before its pod is asked for. A
// profile's shared PVC serves one workspace's sandbox at a time, as
// locally: a start is refused while another workspace's claim of the
// profile exists (checked here, not locked: two starts at the same moment
// can both pass). A PVC is kept when the start fails later: it is where
// the user's data lives, and the next start reuses it.
func (g *globals) ensureState(ctx context.Context, cfg *config.Config, c *kube.Client, t *target) error {
	in := stateInput(cfg, t)
	if in == nil {
		return nil
	}
	if in.DomainHash == "" {
		if err := sharedStateFree(ctx, c, t); err != nil {
			return err
		}
	}
	pvc, err := kubespec.StatePVC(*in)
	if err != nil {
		return err
	}
	cur, created, err := c.EnsurePVC(ctx, pvc)
	if err != nil {
		return err
	}
	if created {
		g.log.Debug("created the persistent dirs' volume claim", "pvc", pvc.Name, "size", in.Size, "class", in.StorageClass)
	} else if cur.DeletionTimestamp != nil {
		return setupError{fmt.Errorf("persistent dirs: volume claim %s is being deleted", pvc.Name),
			"wait until the sandbox that mounted it is gone (`lazaret --backend kubernetes ps`), then start again"}
	}
	return nil
}

// sharedStateFree refuses t's start while a claim of another workspace of
// t's profile exists (its pod mounts the profile's PVC).
func sharedStateFree(ctx context.Context, c *kube.Client, t *target) error {
	claims, err := c.Claims(ctx, kubespec.ManagedSelector+","+kubespec.LabelProfile+"="+t.profile.Name)
	if err != nil {
		return err
	}
	for _, cl := range claims {
		// An attempt's pod mounts its own PVC, not the profile's.
		if cl.DeletionTimestamp != nil || cl.Labels[kubespec.LabelDomain] == t.hash || cl.Labels[kubespec.LabelAttempt] != "" {
			continue
		}
		return refusal{
			msg: fmt.Sprintf("the profile's persistent dirs are in use: profile %s's persistent dirs are used by the sandbox of %s (claim %s); one sandbox per profile at a time shares them",
				t.profile.Name, visible.Line(cl.Annotations[kubespec.AnnotationWorkspace]), visible.Line(cl.Name)),
			hint: fmt.Sprintf("stop it (`lazaret --backend kubernetes stop` in that directory), or set persist = \"workspace\" in [profiles.%s] to give each workspace its own copy", t.profile.Name),
		}
	}
	return nil
}

// pendingState adds to a start that timed out why, when t's PVC is not
// bound: no default StorageClass, or one that does not provision.
func pendingState(ctx context.Context, cfg *config.Config, c *kube.Client, t *target, err error) error {
	in := stateInput(cfg, t)
	if in == nil {
		return err
	}
	name := kubespec.StateName(in.Profile, in.DomainHash)
	pvc, perr := c.PVC(ctx, name)
	if perr != nil || pvc.Status.Phase == corev1.ClaimBound {
		return err
	}
	class := "the cluster's default StorageClass"
	if in.StorageClass != "" {
		class = "StorageClass " + in.StorageClass
	}
	phase := visible.Line(string(pvc.Status.Phase))
	if phase == "" {
		phase = "not bound"
	}
	return setupError{fmt.Errorf("%w; the persistent dirs' volume claim %s is %s", err, name, phase),
		fmt.Sprintf("%s must provision it: set [cluster] storage_class to a class of the cluster (`kubectl get storageclass`), or persistent_dirs = [] in [profiles.%s] to keep nothing", class, t.profile.Name)}
}

// purgeState deletes the state PVCs among pvcs whose scope no remaining
// claim uses (stateUser); used ones are kept and named.
func (g *globals) purgeState(ctx context.Context, c *kube.Client, pvcs []corev1.PersistentVolumeClaim) error {
	for i := range pvcs {
		p := &pvcs[i]
		user, err := stateUser(ctx, c, p)
		if err != nil {
			return err
		}
		if user != "" {
			fmt.Fprintf(g.io.Out, "kept persistent dirs %s: used by %s\n", visible.Line(p.Name), visible.Line(user))
			continue
		}
		if err := c.DeletePVC(ctx, p.Name); err != nil {
			return err
		}
		fmt.Fprintf(g.io.Out, "purged persistent dirs %s\n", visible.Line(p.Name))
	}
	return nil
}

// stateUser is a claim (not being deleted) whose pod mounts p: for a
// workspace's PVC a claim of its Domain Anchor, for a profile's any claim
// of the profile; "" for none.
func stateUser(ctx context.Context, c *kube.Client, p *corev1.PersistentVolumeClaim) (string, error) {
	// The labels come from the cluster: checked before they go into a
	// selector; a PVC with labels lazaret did not write is kept.
	profile, dom := p.Labels[kubespec.LabelProfile], p.Labels[kubespec.LabelDomain]
	sel := kubespec.ManagedSelector + "," + kubespec.LabelProfile + "=" + profile
	if p.Labels[kubespec.LabelStateScope] == "workspace" {
		if !validDomainHash(dom) {
			return "(a PVC with an unexpected domain label)", nil
		}
		sel = kubespec.ManagedSelector + "," + kubespec.LabelDomain + "=" + dom
	} else if config.ValidProfileName(profile) != nil {
		return "(a PVC with an unexpected profile label)", nil
	}
	claims, err := c.Claims(ctx, sel)
	if err != nil {
		return "", err
	}
	for _, cl := range claims {
		if cl.DeletionTimestamp != nil || p.Labels[kubespec.LabelStateScope] != "workspace" && cl.Labels[kubespec.LabelAttempt] != "" {
			continue // an attempt's pod mounts its own PVC, not the profile's
		}
		return cl.Name, nil
	}
	return "", nil
}

// statePVCs are the state PVCs a purge of stop considers: with --all,
// every one of selector's; else t's own scope's, if it exists.
func statePVCs(ctx context.Context, cfg *config.Config, c *kube.Client, t *target, selector string) ([]corev1.PersistentVolumeClaim, error) {
	if t == nil {
		return c.PVCs(ctx, selector+","+kubespec.LabelStateScope)
	}
	in := stateInput(cfg, t)
	if in == nil {
		return nil, nil
	}
	p, err := c.PVC(ctx, kubespec.StateName(in.Profile, in.DomainHash))
	if err != nil {
		if errors.Is(err, kube.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return []corev1.PersistentVolumeClaim{*p}, nil
}

// validDomainHash: 12 lower-case hex digits, as domain.Hash makes them.
func validDomainHash(s string) bool {
	if len(s) != 12 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
