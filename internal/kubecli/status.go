package kubecli

import (
	"context"
	"errors"
	"fmt"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"io"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

func newStatusCmd(g *globals) *cobra.Command {
	return clicore.Verb("status", &cobra.Command{
		Short: "Show the cluster sandbox of this directory",
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := ""
			if len(args) == 1 {
				profile = args[0]
			}
			return g.runStatus(cmd.Context(), profile)
		},
	})
}

func (g *globals) runStatus(ctx context.Context, profile string) error {
	_, c, t, err := g.clientFor(profile)
	if err != nil {
		return err
	}
	claim, err := c.Claim(ctx, kubespec.ClaimName(t.hash))
	if errors.Is(err, kube.ErrNotFound) {
		fmt.Fprintf(g.io.Out, "profile %s: no sandbox for %s in namespace %s\n", t.profile.Name, visible.Line(t.workspace), c.Namespace)
		return nil
	}
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, visible.Line(v)) }
	row("profile", t.profile.Name)
	row("workspace", t.workspace)
	if t.attempt != "" {
		row("attempt", t.attempt)
	}
	row("namespace", c.Namespace)
	row("claim", claim.Name)
	row("state", claimState(claim))
	row("template", claim.Spec.WarmPoolRef.Name)
	row("age", age(g.now(), claim.CreationTimestamp))
	g.podRows(ctx, c, claim, row)
	return w.Flush()
}

// podRows adds the sandbox, pod, node and runtime class of claim, as far
// as they exist.
func (g *globals) podRows(ctx context.Context, c *kube.Client, claim *kubespec.SandboxClaim, row func(k, v string)) {
	if claim.Status.Sandbox.Name == "" {
		return
	}
	row("sandbox", claim.Status.Sandbox.Name)
	r, err := g.podOf(ctx, c, claim)
	if err != nil {
		row("pod", "unknown: "+err.Error())
		return
	}
	row("pod", r.pod)
	pod, err := c.Pod(ctx, r.pod)
	if err != nil {
		row("pod state", "unknown: "+err.Error())
		return
	}
	row("pod state", string(pod.Status.Phase))
	row("node", pod.Spec.NodeName)
	if pod.Spec.RuntimeClassName != nil {
		row("runtime class", *pod.Spec.RuntimeClassName)
	} else {
		row("runtime class", "none (the node's default runtime: NOT gVisor)")
	}
}

// claimState is "Ready", or "not ready (reason: message)".
func claimState(claim *kubespec.SandboxClaim) string {
	cond := kubespec.ReadyCondition(claim.Status.Conditions)
	switch {
	case cond == nil:
		return "pending (no condition yet)"
	case cond.Status == metav1.ConditionTrue:
		return "Ready"
	}
	return fmt.Sprintf("not ready (%s: %s)", cond.Reason, cond.Message)
}

// age is how long ago t was, rounded for people.
func age(now time.Time, t metav1.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	d := now.Sub(t.Time)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Truncate(time.Second).String()
	case d < time.Hour:
		return d.Truncate(time.Minute).String()
	}
	return d.Truncate(time.Hour).String()
}

func newPsCmd(g *globals) *cobra.Command {
	return clicore.Verb("ps", &cobra.Command{
		Short: "List lazaret's sandbox claims in the namespace",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, c, err := g.client()
			if err != nil {
				return err
			}
			claims, err := c.Claims(cmd.Context(), kubespec.ManagedSelector)
			if errors.Is(err, kube.ErrUnreachable) {
				// This machine's kept sessions are known without the cluster: a
				// laptop away from its network still lists them (link lost).
				_ = g.printKept(cmd.Context())
			}
			if err != nil {
				return err
			}
			if err := g.printClaims(g.io.Out, claims); err != nil {
				return err
			}
			return g.printKept(cmd.Context())
		},
	})
}

// printClaims is ps's table; every field comes from the cluster and is
// shown escaped.
func (g *globals) printClaims(out io.Writer, claims []kubespec.SandboxClaim) error {
	if len(claims) == 0 {
		fmt.Fprintln(out, "no lazaret sandboxes in this namespace")
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CLAIM\tPROFILE\tSTATE\tSANDBOX\tAGE\tWORKSPACE")
	for i := range claims {
		cl := &claims[i]
		state := "Ready"
		if s := claimState(cl); s != "Ready" {
			state = "not ready"
		}
		ws := visible.Line(cl.Annotations[kubespec.AnnotationWorkspace])
		if a := cl.Labels[kubespec.LabelAttempt]; a != "" {
			ws += " (attempt " + visible.Line(a) + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", visible.Line(cl.Name), visible.Line(cl.Labels[kubespec.LabelProfile]), state,
			visible.Line(cl.Status.Sandbox.Name), age(g.now(), cl.CreationTimestamp), ws)
	}
	return w.Flush()
}
