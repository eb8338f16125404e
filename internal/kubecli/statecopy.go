package kubecli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// The copy of a persistent dirs' PVC into another on the cluster: a fork
// gives each attempt its parent's (a clone when the storage class is a
// CSI driver's, else a copy), `attempts keep` gives the profile an
// attempt's. Either way a copy pod (kubespec.CopyPod) runs: it copies,
// or, for a clone, finds the source's entries already there (a driver
// that ignored the dataSource gets a copy after all), and says which and
// how much in its termination message.

// defaultCopyTimeout bounds a fork's or keep's copy pods (image pull,
// volume binding, the copy itself).
const defaultCopyTimeout = 10 * time.Minute

// copied is what one copy pod did: "clone" or "copy", and the
// destination's size.
type copied struct {
	how   string
	bytes int64
}

// canClone says whether a PVC of src's StorageClass can be a clone of it:
// the class's provisioner is a registered CSI driver (the in-tree ones,
// kubernetes.io/*, refuse a dataSource). Any doubt (no class, a class or
// driver lazaret may not read) is a copy.
func canClone(ctx context.Context, c *kube.Client, src *corev1.PersistentVolumeClaim) bool {
	if src.Spec.StorageClassName == nil || *src.Spec.StorageClassName == "" {
		return false
	}
	prov, err := c.StorageClass(ctx, *src.Spec.StorageClassName)
	if err != nil || prov == "" || strings.HasPrefix(prov, "kubernetes.io/") {
		return false
	}
	ok, err := c.CSIDriverExists(ctx, prov)
	return err == nil && ok
}

// runCopies runs a copy pod for each of ins at once and waits for all of
// them within timeout; the pods are deleted again whatever happens.
func (g *globals) runCopies(ctx context.Context, c *kube.Client, ins []kubespec.CopyInput, timeout time.Duration) ([]copied, error) {
	pods := make([]*corev1.Pod, len(ins))
	for i, in := range ins {
		p, err := kubespec.CopyPod(in)
		if err != nil {
			return nil, err
		}
		pods[i] = p
	}
	var made []string
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range made {
			if err := c.DeletePod(dctx, n); err != nil {
				g.log.Warn("the copy pod was not deleted", "pod", n, "err", err)
			}
		}
	}()
	for _, p := range pods {
		// A pod of that name is one an interrupted fork or keep left.
		if err := c.DeletePod(ctx, p.Name); err != nil {
			return nil, err
		}
		if err := c.CreatePod(ctx, p); err != nil {
			return nil, err
		}
		made = append(made, p.Name)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([]copied, len(pods))
	for i, p := range pods {
		r, err := g.waitCopy(wctx, c, p.Name, ins[i].Dest, timeout)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// waitCopy waits until copy pod name has ended and reads what it did.
func (g *globals) waitCopy(ctx context.Context, c *kube.Client, name, dest string, timeout time.Duration) (copied, error) {
	interval := min(100*time.Millisecond, g.poll)
	var last *corev1.Pod
	for {
		p, err := c.Pod(ctx, name)
		switch {
		case err == nil:
			last = p
			switch p.Status.Phase {
			case corev1.PodSucceeded:
				msg := terminationMessage(p)
				if strings.TrimSpace(msg) == "" {
					// A runtime that drops the termination message: the
					// copy went, its size is unknown.
					g.log.Warn("the copy pod ended without its message: the size is unknown", "pod", name)
					return copied{how: "copy"}, nil
				}
				return parseCopied(name, msg)
			case corev1.PodFailed:
				return copied{}, fmt.Errorf("copying the persistent dirs failed (pod %s): %s", name, visible.Line(strings.TrimSpace(terminationMessage(p))))
			}
		case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
			return copied{}, err
		}
		select {
		case <-ctx.Done():
			return copied{}, g.copyStuck(c, name, dest, timeout, last)
		case <-time.After(interval):
			interval = min(2*interval, time.Second, max(g.poll, time.Millisecond))
		}
	}
}

// copyStuck says why a copy pod did not end in time: its volume not
// bound, its image, or its state.
func (g *globals) copyStuck(c *kube.Client, name, dest string, timeout time.Duration, p *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := fmt.Sprintf("copy pod %s did not finish within %s", name, timeout)
	if pvc, err := c.PVC(ctx, dest); err == nil && pvc.Status.Phase != corev1.ClaimBound {
		hint := "the storage class must provision it (`kubectl describe pvc " + dest + "`); --timeout waits longer"
		if pvc.Spec.DataSource != nil {
			hint = "the storage class may not clone volumes (`kubectl describe pvc " + dest + "`): fork again with --no-clone"
		}
		return setupError{fmt.Errorf("%s: volume claim %s is %s", msg, dest, visible.Line(string(pvc.Status.Phase))), hint}
	}
	if p != nil {
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Waiting != nil {
				msg += fmt.Sprintf(": %s (%s)", visible.Line(s.State.Waiting.Reason), visible.Line(s.State.Waiting.Message))
			}
		}
		if len(p.Status.ContainerStatuses) == 0 {
			msg += ": " + visible.Line(string(p.Status.Phase))
		}
	}
	return setupError{errors.New(msg), "--timeout waits longer; `kubectl describe pod " + name + "` says what it waits on"}
}

// terminationMessage is the copy container's termination message.
func terminationMessage(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == kubespec.CopyContainer && s.State.Terminated != nil {
			return s.State.Terminated.Message
		}
	}
	return ""
}

// parseCopied reads "<clone|copy> <KiB>", the copy script's last word.
func parseCopied(pod, msg string) (copied, error) {
	f := strings.Fields(msg)
	if len(f) == 2 && (f[0] == "clone" || f[0] == "copy") {
		if kib, err := strconv.ParseInt(f[1], 10, 64); err == nil && kib >= 0 && kib < 1<<40 {
			return copied{how: f[0], bytes: kib << 10}, nil
		}
	}
	return copied{}, fmt.Errorf("copy pod %s ended without saying what it copied (%q)", pod, visible.Line(msg))
}
