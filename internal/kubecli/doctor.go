package kubecli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// The agent-sandbox controller's leader-election Lease (v1.0.1,
// cmd/agent-sandbox-controller) and the namespaces it is looked for in.
const controllerLease = "a3317529.agent-sandbox.x-k8s.io"

var controllerLeaseNamespaces = []string{"agent-sandbox-system", "kube-system", "default"}

// leaseFresh is how recently a running controller renewed its lease
// (controller-runtime renews every 2 s by default, gives up after 15 s).
const leaseFresh = time.Minute

type doctorOptions struct {
	noProbe bool
	profile string
}

// check is one line of doctor's report.
type check struct {
	status string // "ok", "FAIL", "WARN"
	what   string
	detail string
}

func newDoctorCmd(g *globals) *cobra.Command {
	o := doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor [PROFILE]",
		Short: "Check the cluster for lazaret's Kubernetes backend",
		Long: `Check that the cluster is reachable, the namespace exists, agent-sandbox's
v1beta1 resources are installed and its controller runs, the RuntimeClass
exists, and whether the cluster enforces NetworkPolicy: an active probe
(a server pod, a control client that must reach it, and a client under a
deny-all egress NetworkPolicy that must not), whose answer is "enforced",
"NOT enforced" or "unknown". Starts reuse the answer for a day.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.profile = args[0]
			}
			return g.runDoctor(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.noProbe, "no-probe", false, "do not run the NetworkPolicy probe; show the namespace's last result")
	return cmd
}

func (g *globals) runDoctor(ctx context.Context, o doctorOptions) error {
	cfg, c, err := g.client()
	if err != nil {
		return err
	}
	checks := g.doctorChecks(ctx, cfg, c, o)
	failed := 0
	for _, ch := range checks {
		fmt.Fprintf(g.io.Out, "%-4s  %s: %s\n", ch.status, ch.what, visible.Line(ch.detail))
		if ch.status == "FAIL" {
			failed++
		}
	}
	if failed > 0 {
		return setupError{fmt.Errorf("%d check(s) failed", failed), "fix what the FAIL lines name (" + locate.Doc("KUBERNETES.md") + ")"}
	}
	return nil
}

// doctorChecks runs the checks in order; a cluster that cannot be
// reached ends the list.
func (g *globals) doctorChecks(ctx context.Context, cfg *config.Config, c *kube.Client, o doctorOptions) []check {
	v, err := c.ServerVersion()
	if err != nil {
		return []check{{"FAIL", "cluster", err.Error()}}
	}
	out := []check{{"ok", "cluster", fmt.Sprintf("%s (%s)", c.Host, v)}}
	if err := c.NamespaceExists(ctx); err != nil {
		out = append(out, check{"FAIL", "namespace " + c.Namespace, err.Error()})
	} else {
		out = append(out, check{"ok", "namespace", c.Namespace})
	}
	out = append(out, crdCheck(c, kubespec.SandboxGroup, kubespec.ResourceSandboxes),
		crdCheck(c, kubespec.ExtensionsGroup, kubespec.ResourceSandboxTemplates, kubespec.ResourceSandboxWarmPools, kubespec.ResourceSandboxClaims),
		g.controllerCheck(ctx, c))
	if h, err := c.RuntimeClassHandler(ctx, cfg.Cluster.RuntimeClass); err != nil {
		out = append(out, check{"FAIL", "runtime class " + cfg.Cluster.RuntimeClass, err.Error()})
	} else {
		out = append(out, check{"ok", "runtime class " + cfg.Cluster.RuntimeClass, "handler " + h})
	}
	return append(out, storageCheck(ctx, cfg, c), resourcesCheck(ctx, cfg, c, orDefault(o.profile)), g.enforcementCheck(ctx, cfg, c, o))
}

// crdCheck: the group's v1beta1 serves every resource named.
func crdCheck(c *kube.Client, group string, resources ...string) check {
	gv := group + "/" + kubespec.Version
	have, err := c.Resources(gv)
	if err != nil {
		return check{"FAIL", gv, err.Error()}
	}
	var missing []string
	for _, r := range resources {
		if !slices.Contains(have, r) {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return check{"FAIL", gv, fmt.Sprintf("missing %v: install agent-sandbox v1.0.1's CRDs", missing)}
	}
	return check{"ok", gv, fmt.Sprintf("%v served", resources)}
}

// controllerCheck looks at the controller's leader-election Lease: what
// it proves is that a controller renewed it lately, not that it
// reconciles lazaret's claims (a claim reaching Ready proves that, and a
// start says so when it does not).
func (g *globals) controllerCheck(ctx context.Context, c *kube.Client) check {
	what := "agent-sandbox controller"
	for _, ns := range controllerLeaseNamespaces {
		renewed, holder, err := c.LeaseRenewed(ctx, ns, controllerLease)
		if errors.Is(err, kube.ErrNotFound) {
			continue
		}
		if err != nil {
			return check{"WARN", what, "unknown: " + err.Error()}
		}
		ago := g.now().Sub(renewed).Truncate(time.Second)
		if renewed.IsZero() || ago > leaseFresh {
			return check{"FAIL", what, fmt.Sprintf("its lease %s/%s was last renewed %s ago by %s: the controller is not running", ns, controllerLease, ago, holder)}
		}
		return check{"ok", what, fmt.Sprintf("lease %s/%s renewed %s ago by %s", ns, controllerLease, ago, holder)}
	}
	return check{"WARN", what, fmt.Sprintf("unknown: no lease %s in %v (a controller without leader election has none); a start will say if claims do not become Ready", controllerLease, controllerLeaseNamespaces)}
}

// enforcementCheck runs the probe (or reads the last result) and says
// plainly what it found.
func (g *globals) enforcementCheck(ctx context.Context, cfg *config.Config, c *kube.Client, o doctorOptions) check {
	what := "NetworkPolicy"
	var res probeResult
	if o.noProbe {
		var err error
		if res, err = readRecord(ctx, c); err != nil {
			return check{"WARN", what, "unknown: no probe result in this namespace (run doctor without --no-probe)"}
		}
	} else {
		image := cfg.Cluster.ProbeImage
		if image == "" {
			p, err := cfg.Profile(orDefault(o.profile))
			if err != nil {
				return check{"WARN", what, "unknown: " + err.Error()}
			}
			image = p.Image
		}
		res = g.probeAndRecord(ctx, cfg, c, image)
	}
	status := "ok"
	if res.Result != enforced {
		status = "WARN"
	}
	return check{status, what, fmt.Sprintf("%s: %s (checked %s)", res.Result, res.Detail, res.Checked.UTC().Format(time.RFC3339))}
}

func orDefault(profile string) string {
	if profile == "" {
		return config.DefaultProfileName
	}
	return profile
}
