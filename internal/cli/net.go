package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/domain"
	"github.com/lazaret-dev/lazaret/internal/netdapi"
	"github.com/lazaret-dev/lazaret/internal/netpolicy"
)

// netOptions are the flags of `lazaret net …`. The commands talk to the
// sidecar's control socket directly (its path comes from the Domain
// Anchor); the coordinator is not involved.
type netOptions struct {
	profile     string // PROFILE, or the deprecated --profile
	profileFlag string
	json        bool
	forDur      time.Duration
}

// netProfile takes PROFILE from args[:n] (n is 0 or 1) like every verb.
func (g *globalOptions) netProfile(cmd *cobra.Command, o *netOptions, args []string, n int, usage string) error {
	positional := ""
	if n > 0 {
		positional = args[0]
	}
	p, err := g.profileOf(cmd, positional, o.profileFlag, usage)
	o.profile = p
	return err
}

func newNetCmd(g *globalOptions) *cobra.Command {
	o := &netOptions{}
	cmd := &cobra.Command{
		Use:   "net",
		Short: "Inspect and change the egress policy of a running sandbox",
		Long: `The network sidecar (lazaret-netd) enforces the sandbox's egress allowlist:
allow_egress CIDRs and allow_domains names. These commands change it while
the sandbox runs; established connections are kept. Like every verb, they
act on the sandbox of PROFILE (default: "default") in the current directory.`,
	}
	addDeprecatedProfileFlag(g, cmd, true, &o.profileFlag)

	status := &cobra.Command{
		Use:               "status [PROFILE]",
		Short:             "Show the active allow sets, resolved names and recent denials",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeProfileArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.netProfile(cmd, o, args, len(args), ""); err != nil {
				return err
			}
			return runNetStatus(cmd.Context(), g, o)
		},
	}
	status.Flags().BoolVar(&o.json, "json", false, "print JSON")

	allow := &cobra.Command{
		Use:   "allow [PROFILE] CIDR|ADDRESS|DOMAIN",
		Short: "Allow a CIDR, an address or a domain (exact or *.suffix) now, optionally for a while",
		Example: `  lazaret net allow 140.82.112.0/20
  lazaret net allow claude registry.npmjs.org --for 10m
  lazaret net allow '*.githubusercontent.com'`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: g.completeProfileArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.netProfile(cmd, o, args, len(args)-1, " TARGET"); err != nil {
				return err
			}
			return runNetAllow(cmd.Context(), g, o, args[len(args)-1])
		},
	}
	allow.Flags().DurationVar(&o.forDur, "for", 0, "expire after this long (e.g. 10m); permanent until the sandbox stops when not given")

	reload := &cobra.Command{
		Use:               "reload [PROFILE]",
		Short:             "Re-read the configuration and replace the sandbox's allowlist with it",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeProfileArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.netProfile(cmd, o, args, len(args), ""); err != nil {
				return err
			}
			return runNetReload(cmd.Context(), g, o)
		},
	}
	cmd.AddCommand(status, allow, reload)
	return cmd
}

func (g *globalOptions) netClient(o *netOptions) (*config.Profile, *domain.Anchor, *netdapi.Client, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	p, a, err := g.resolveDomain(cfg, o.profile, "")
	if err != nil {
		return nil, nil, nil, err
	}
	return p, a, &netdapi.Client{Socket: a.NetdSocket(), Sandbox: true}, nil
}

func netUnavailable(ctx context.Context, g *globalOptions, err error, a *domain.Anchor) error {
	if errors.Is(err, netdapi.ErrUnavailable) && g.domainClient(a).alive(ctx) {
		// The sandbox runs but its sidecar does not answer: it died (the
		// coordinator is stopping the sandbox) or is still starting.
		return withHint(fmt.Errorf("the network sidecar of the sandbox for profile %s in %s does not answer: %w", a.Profile, a.Workspace, err), exitFailure,
			"`lazaret status` says whether the sandbox is being stopped because lazaret-netd died")
	}
	if errors.Is(err, netdapi.ErrUnavailable) {
		return withHint(fmt.Errorf("no running sandbox for profile %s in %s", a.Profile, a.Workspace), exitFailure,
			"start it with "+verbLine("shell", a.Profile)+"; the policy of a stopped sandbox is the configuration")
	}
	return err
}

func runNetStatus(ctx context.Context, g *globalOptions, o *netOptions) error {
	_, a, cl, err := g.netClient(o)
	if err != nil {
		return err
	}
	st, err := cl.Status(ctx)
	if err != nil {
		return netUnavailable(ctx, g, err, a)
	}
	if o.json {
		return writeJSON(g.io.Out, st)
	}
	printNetStatus(g.io.Out, st)
	return nil
}

func runNetAllow(ctx context.Context, g *globalOptions, o *netOptions, target string) error {
	if _, _, err := netpolicy.ParseTarget(target); err != nil {
		return usageError{err}
	}
	if o.forDur < 0 {
		return usageError{fmt.Errorf("--for: negative duration %v", o.forDur)}
	}
	if o.forDur > 0 && o.forDur < time.Second {
		return usageError{fmt.Errorf("--for: %v is shorter than a second", o.forDur)}
	}
	_, a, cl, err := g.netClient(o)
	if err != nil {
		return err
	}
	if _, err := cl.Allow(ctx, target, o.forDur, "lazaret net allow"); err != nil {
		return netUnavailable(ctx, g, err, a)
	}
	g.auditPolicyChange(ctx, a, "net allow", map[string]string{"target": target, "for": o.forDur.String()})
	if o.forDur > 0 {
		fmt.Fprintf(g.io.Out, "allowed %s for %v\n", target, o.forDur)
	} else {
		fmt.Fprintf(g.io.Out, "allowed %s until the sandbox stops (add it to the configuration to keep it)\n", target)
	}
	return nil
}

func runNetReload(ctx context.Context, g *globalOptions, o *netOptions) error {
	p, a, cl, err := g.netClient(o)
	if err != nil {
		return err
	}
	pol, err := netpolicy.FromConfig(p.AllowEgress, p.AllowDomains)
	if err != nil {
		return err
	}
	st, err := cl.SetPolicy(ctx, pol, "lazaret net reload")
	if err != nil {
		return netUnavailable(ctx, g, err, a)
	}
	g.auditPolicyChange(ctx, a, "net reload", map[string]string{"cidrs": fmt.Sprint(len(st.Policy.AllowEgress)), "domains": fmt.Sprint(len(st.Policy.AllowDomains))})
	fmt.Fprintf(g.io.Out, "reloaded: %d CIDR(s), %d domain(s) allowed\n", len(st.Policy.AllowEgress), len(st.Policy.AllowDomains))
	return nil
}

func printNetStatus(w io.Writer, st *netdapi.Status) {
	tw := newTable(w, "")
	defer tw.Flush()
	state := "not installed"
	if st.Applied {
		state = "installed (default deny)"
	}
	fmt.Fprintf(tw, "ruleset:\t%s\n", state)
	fmt.Fprintf(tw, "upstream dns:\t%s\n", strings.Join(st.Upstreams, ", "))
	if st.Grace > 0 {
		fmt.Fprintf(tw, "resolved kept:\t%v after the last answer (or its TTL if longer)\n", time.Duration(st.Grace)*time.Second)
	}
	if len(st.HostAddrs) > 0 {
		hs := make([]string, len(st.HostAddrs))
		for i, h := range st.HostAddrs {
			hs[i] = h.String()
		}
		fmt.Fprintf(tw, "host addresses:\t%s (never opened by a DNS answer)\n", strings.Join(hs, ", "))
	}
	fmt.Fprintf(tw, "\nallowed CIDRs:\n")
	if len(st.Policy.AllowEgress) == 0 {
		fmt.Fprintf(tw, "  (none)\n")
	}
	for _, c := range st.Policy.AllowEgress {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Prefix, expiry(c.Expires))
	}
	fmt.Fprintf(tw, "\nallowed domains:\n")
	if len(st.Policy.AllowDomains) == 0 {
		fmt.Fprintf(tw, "  (none)\n")
	}
	for _, d := range st.Policy.AllowDomains {
		fmt.Fprintf(tw, "  %s\t%s\n", d.Pattern, expiry(d.Expires))
	}
	if len(st.Resolved) > 0 {
		fmt.Fprintf(tw, "\nresolved addresses:\n")
		for _, r := range st.Resolved {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", field(r.Addr), field(r.Name), expiry(r.Expires))
		}
	}
	var total uint64
	for k, v := range st.Counters {
		if strings.HasPrefix(k, "deny ") {
			total += v
		}
	}
	fmt.Fprintf(tw, "\ndenied packets:\t%d (metadata %d, dns %d)\n", total,
		st.Counters["deny metadata ipv4"]+st.Counters["deny metadata ipv6"],
		st.Counters["deny other dns udp"]+st.Counters["deny other dns tcp"])
	fmt.Fprintf(tw, "\nrecent denials (%s):\n", st.DenialLog)
	if len(st.Denials) == 0 {
		fmt.Fprintf(tw, "  (none)\n")
	}
	for _, d := range st.Denials {
		fmt.Fprintf(tw, "  %s\t%d\tlast %s\n", field(d.Dest), d.Count, d.Last.Local().Format(time.TimeOnly))
	}
	printSecretStats(tw, st)
}

// printSecretStats shows, per secret and host, the requests netd injected
// and the placeholders it refused (sent to a host the secret is not for).
func printSecretStats(w io.Writer, st *netdapi.Status) {
	if len(st.Injecting) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsecrets (injected for %s):\n", field(strings.Join(st.Injecting, ", ")))
	if len(st.Secrets) == 0 {
		fmt.Fprintf(w, "  (no requests yet)\n")
	}
	fmt.Fprintf(w, "  secret\thost\tinjected\tplaceholder refused\n")
	for _, s := range st.Secrets {
		fmt.Fprintf(w, "  %s\t%s\t%d\t%d\n", field(s.Secret), field(s.Host), s.Injected, s.Refused)
	}
}

func expiry(t time.Time) string {
	if t.IsZero() {
		return "permanent"
	}
	return "expires in " + time.Until(t).Round(time.Second).String()
}
