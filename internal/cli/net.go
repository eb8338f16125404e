package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// netOptions are the flags of `lazaret net …`. The commands talk to the
// sidecar's control socket directly (its path comes from the Domain
// Anchor); the coordinator is not involved.
type netOptions struct {
	profile     string // PROFILE, or the deprecated --profile
	profileFlag string
	json        bool
	forDur      time.Duration
	yes         bool // net allow: a CIDR broader than the bound
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
		Long: `Allow a CIDR, an address or a domain in the running sandbox's policy.
A CIDR is taken as the network it really opens (host bits cleared:
8.8.8.8/0 is 0.0.0.0/0, every IPv4 destination), and one shorter than the
breadth bound config check warns about (/8 for IPv4, /16 for IPv6) is
refused without --yes.`,
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
	allow.Flags().BoolVar(&o.yes, "yes", false, "allow a CIDR broader than /8 (IPv4) or /16 (IPv6)")

	reload := &cobra.Command{
		Use:               "reload [PROFILE]",
		Short:             "Re-read the configuration and replace the sandbox's allowlist with it (--for entries stay until they expire)",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeProfileArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.netProfile(cmd, o, args, len(args), ""); err != nil {
				return err
			}
			return runNetReload(cmd.Context(), g, o)
		},
	}
	cmd.AddCommand(status, allow, reload, newNetCheckCmd(g, o))
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
	p, a, cl, err := g.netClient(o)
	if err != nil {
		return err
	}
	st, err := cl.Status(ctx)
	if errors.Is(err, netdapi.ErrUnavailable) && !g.domainClient(a).alive(ctx) {
		return printConfiguredPolicy(g, o, p, a)
	}
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
	target, opens, err := allowTarget(target, o.yes, o.profile)
	if err != nil {
		return err
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
		fmt.Fprintf(g.io.Out, "allowed %s%s for %v\n", target, opens, o.forDur)
	} else {
		fmt.Fprintf(g.io.Out, "allowed %s%s until the sandbox stops (add it to the configuration to keep it)\n", target, opens)
	}
	return nil
}

// allowTarget checks the argument of `net allow` by config check's rules
// and returns what to send netd: a CIDR as the network it really opens
// (8.8.8.8/0 is 0.0.0.0/0), with opens saying how much that is; a CIDR
// broader than the bound (config.Broad) needs yes.
func allowTarget(arg string, yes bool, profile string) (target, opens string, err error) {
	cidr, _, err := netpolicy.ParseTarget(arg)
	if err != nil {
		return "", "", usageError{err}
	}
	if !cidr.IsValid() {
		return arg, "", nil
	}
	if cidr.Addr().Is4In6() {
		return "", "", usageError{fmt.Errorf("%s: write IPv4-mapped addresses in IPv4 form", arg)}
	}
	target = cidr.String()
	var notes []string
	if config.HostBitsSet(arg, cidr) {
		notes = append(notes, arg+" has host bits set")
	}
	if !cidr.IsSingleIP() {
		notes = append(notes, config.Breadth(cidr))
	}
	if config.Broad(cidr) && !yes {
		return "", "", withHint(fmt.Errorf("%s allows %s: broader than %s, the breadth bound", target, config.Breadth(cidr), config.BroadBound(cidr)),
			exitUsage, "allow a narrower network, or confirm this one with "+strings.TrimSuffix(verbLine("net allow", profile), "`")+" --yes "+target+"`")
	}
	if len(notes) > 0 {
		opens = " (" + strings.Join(notes, "; ") + ")"
	}
	return target, opens, nil
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
	kept := keptEntries(pol, st.Policy)
	fmt.Fprintf(g.io.Out, "reloaded: the configuration's %d CIDR(s) and %d domain(s) replace the allowlist\n", len(pol.AllowEgress), len(pol.AllowDomains))
	if len(kept) > 0 {
		fmt.Fprintf(g.io.Out, "kept until they expire (allowed with --for): %s\n", strings.Join(kept, ", "))
	}
	return nil
}

// keptEntries lists what the sidecar's policy holds beyond the
// configuration's, conf: the entries `net allow --for` added, which a
// reload keeps until they expire.
func keptEntries(conf, live netpolicy.Policy) []string {
	var kept []string
	for _, c := range live.AllowEgress {
		if !slices.ContainsFunc(conf.AllowEgress, func(x netpolicy.CIDR) bool { return x.Prefix == c.Prefix }) {
			kept = append(kept, c.Prefix.String()+" ("+expiry(c.Expires)+")")
		}
	}
	for _, d := range live.AllowDomains {
		if !slices.ContainsFunc(conf.AllowDomains, func(x netpolicy.Domain) bool { return x.Pattern == d.Pattern }) {
			kept = append(kept, field(d.Pattern)+" ("+expiry(d.Expires)+")")
		}
	}
	return kept
}

// printConfiguredPolicy is `net status` of a sandbox that does not run:
// the configuration's policy, which its next start installs.
func printConfiguredPolicy(g *globalOptions, o *netOptions, p *config.Profile, a *domain.Anchor) error {
	pol, err := netpolicy.FromConfig(p.AllowEgress, p.AllowDomains)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(g.io.Out, struct {
			Running bool             `json:"running"`
			Policy  netpolicy.Policy `json:"configured_policy"`
		}{false, pol})
	}
	fmt.Fprintf(g.io.Out, "not running: profile %s in %s (domain %s)\n", a.Profile, field(a.Workspace), a.Hash)
	fmt.Fprintf(g.io.Out, "configured policy (installed when it starts; default deny):\n")
	tw := newTable(g.io.Out, "")
	defer tw.Flush()
	printAllowLists(tw, pol)
	return nil
}

// printAllowLists prints a policy's allowed CIDRs and domains.
func printAllowLists(tw io.Writer, pol netpolicy.Policy) {
	fmt.Fprintf(tw, "\nallowed CIDRs:\n")
	if len(pol.AllowEgress) == 0 {
		fmt.Fprintf(tw, "  (none)\n")
	}
	for _, c := range pol.AllowEgress {
		broad := ""
		if config.Broad(c.Prefix) {
			broad = " (" + config.Breadth(c.Prefix) + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", c.Prefix, expiry(c.Expires), broad)
	}
	fmt.Fprintf(tw, "\nallowed domains:\n")
	if len(pol.AllowDomains) == 0 {
		fmt.Fprintf(tw, "  (none)\n")
	}
	for _, d := range pol.AllowDomains {
		fmt.Fprintf(tw, "  %s\t%s\n", d.Pattern, expiry(d.Expires))
	}
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
	printAllowLists(tw, st.Policy)
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
