package kubecli

import (
	"context"
	"errors"
	"fmt"
	"github.com/lazaret-dev/lazaret/internal/clicore"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/netdpod"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

type stopOptions struct {
	all   bool
	purge bool
}

func newStopCmd(g *globals) *cobra.Command {
	o := stopOptions{}
	cmd := &cobra.Command{
		Short: "Delete the cluster sandbox of this directory (its claim)",
		Long: `Delete the SandboxClaim of PROFILE (default "default") for this directory; the
controller then deletes its Sandbox and pod. With --all, every lazaret claim
in the namespace (of PROFILE only, when given). The profile's templates and
warm pools stay for the next start, unless --purge: then those no claim uses
any more are deleted too, with their sidecar ConfigMaps and Secrets (the next
start makes new secret placeholders and a new CA), and the persistent dirs'
volume claim of this workspace's State Anchor (the profile's, with
persist = "profile") unless another sandbox uses it; with --all, every
lazaret persistent dirs' volume claim (of PROFILE) no sandbox uses.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := ""
			if len(args) == 1 {
				profile = args[0]
			}
			return g.runStop(cmd.Context(), profile, o)
		},
	}
	clicore.Verb("stop", cmd)
	cmd.Flags().BoolVar(&o.all, "all", false, "every lazaret sandbox in the namespace (of PROFILE, when given)")
	cmd.Flags().BoolVar(&o.purge, "purge", false, "also delete the templates and warm pools no claim uses any more (and their sidecar ConfigMaps and Secrets), and the persistent dirs' volume claim (what the agent installed)")
	return cmd
}

func (g *globals) runStop(ctx context.Context, profile string, o stopOptions) error {
	cfg, c, err := g.client()
	if err != nil {
		return err
	}
	var names []string
	var t *target
	selector := kubespec.ManagedSelector
	if o.all && g.attempt != "" {
		return clicore.UsageError{Err: errors.New("stop: --all and --attempt: choose one (--all stops every sandbox, attempts included)")}
	}
	if o.all {
		if profile != "" {
			selector += "," + kubespec.LabelProfile + "=" + profile
		}
		claims, err := c.Claims(ctx, selector)
		if err != nil {
			return err
		}
		for _, cl := range claims {
			names = append(names, cl.Name)
		}
	} else {
		if t, err = g.resolve(cfg, profile); err != nil {
			return err
		}
		profile = t.profile.Name
		selector += "," + kubespec.LabelProfile + "=" + profile
		names = []string{kubespec.ClaimName(t.hash)}
		if _, err := c.Claim(ctx, names[0]); errors.Is(err, kube.ErrNotFound) {
			fmt.Fprintf(g.io.Out, "no sandbox of profile %s for %s\n", profile, visible.Line(t.workspace))
			names = nil
		} else if err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := c.Delete(ctx, kube.ClaimsGVR, n); err != nil {
			return err
		}
		fmt.Fprintf(g.io.Out, "stopped %s\n", visible.Line(n))
	}
	dropResumables(cfg, names)
	if !o.purge {
		return nil
	}
	if err := g.purge(ctx, c, selector); err != nil {
		return err
	}
	pvcs, err := statePVCs(ctx, cfg, c, t, selector)
	if err != nil {
		return err
	}
	return g.purgeState(ctx, c, pvcs)
}

// purge deletes the templates and warm pools matching selector that no
// remaining claim names.
func (g *globals) purge(ctx context.Context, c *kube.Client, selector string) error {
	claims, err := c.Claims(ctx, kubespec.ManagedSelector)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, cl := range claims {
		if cl.DeletionTimestamp == nil {
			used[cl.Spec.WarmPoolRef.Name] = true
		}
	}
	pools, err := c.WarmPools(ctx, selector)
	if err != nil {
		return err
	}
	for _, p := range pools {
		if !used[p.Name] {
			if err := c.Delete(ctx, kube.WarmPoolsGVR, p.Name); err != nil {
				return err
			}
		}
	}
	templates, err := c.Templates(ctx, selector)
	if err != nil {
		return err
	}
	var orphans []string
	for _, t := range templates {
		if used[t.Name] {
			continue
		}
		if err := c.Delete(ctx, kube.TemplatesGVR, t.Name); err != nil {
			return err
		}
		fmt.Fprintf(g.io.Out, "purged template %s\n", visible.Line(t.Name))
		if cm := sidecarConfigMap(&t); cm != "" {
			orphans = append(orphans, cm)
		}
	}
	return purgeSidecarObjects(ctx, c, orphans)
}

// purgeSidecarObjects deletes the sidecar ConfigMaps of purged templates
// and their Secrets (the secret values, the CA key), unless a remaining
// template still uses them. The next start of the profile then makes new
// placeholders and a new CA.
func purgeSidecarObjects(ctx context.Context, c *kube.Client, orphans []string) error {
	if len(orphans) == 0 {
		return nil
	}
	rest, err := c.Templates(ctx, kubespec.ManagedSelector)
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, t := range rest {
		kept[sidecarConfigMap(&t)] = true
	}
	for _, cm := range orphans {
		if kept[cm] {
			continue
		}
		if err := c.DeleteSecret(ctx, netdpod.SecretName(cm)); err != nil {
			return err
		}
		if err := c.DeleteConfigMap(ctx, cm); err != nil {
			return err
		}
	}
	return nil
}

// sidecarConfigMap is the name of the sidecar ConfigMap t's pods mount,
// "" for none.
func sidecarConfigMap(t *kubespec.SandboxTemplate) string {
	for _, v := range t.Spec.PodTemplate.Spec.Volumes {
		if v.Name == netdpod.ConfigVolume && v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	return ""
}
