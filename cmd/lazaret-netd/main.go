// Command lazaret-netd is the Network Sidecar that owns the sandbox network
// namespace: it installs the egress ruleset before the agent starts, runs
// the namespace's DNS resolver and takes policy updates on its control
// socket. It imports only what that needs (see deps_test.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/sidecar/netd"
	"github.com/lazaret-dev/lazaret/internal/version"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

type addrList []netip.AddrPort

func (l *addrList) String() string { return fmt.Sprint(*l) }
func (l *addrList) Set(s string) error {
	ap, err := parseHostPort(s, 53)
	if err != nil {
		return err
	}
	*l = append(*l, ap)
	return nil
}

// hostList collects --host-addr values.
type hostList []netip.Addr

func (l *hostList) String() string { return fmt.Sprint(*l) }
func (l *hostList) Set(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("%q is not an address", s)
	}
	*l = append(*l, a)
	return nil
}

func parseHostPort(s string, defPort uint16) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not an address or address:port", s)
	}
	return netip.AddrPortFrom(a, defPort), nil
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println("lazaret-netd", version.Version)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "probe" {
		os.Exit(probe(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "ctl" {
		os.Exit(ctl(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:]))
}

// probe is the pod's readiness probe (an exec probe: the kubelet's TCP and
// UDP probes dial the pod's address, and netd answers on loopback only):
// it asks the resolver at the address given (127.0.0.1:53 by default) for
// a name no policy allows and exits 0 on any answer to its query.
func probe(args []string) int {
	target := "127.0.0.1:53"
	if len(args) > 0 {
		target = args[0]
	}
	// Asked again every probeRetry until probeWait has passed: the first
	// probe of a starting pod then passes the moment netd answers,
	// instead of failing and waiting a whole probe period for the next
	// one; the claim is Ready only after it.
	deadline := time.Now().Add(probeWait)
	var err error
	for {
		if err = probeOnce(target); err == nil {
			return 0
		}
		if time.Now().Add(probeRetry).After(deadline) {
			break
		}
		time.Sleep(probeRetry)
	}
	fmt.Fprintf(os.Stderr, "lazaret-netd probe: no answer from %s: %v\n", target, err)
	return 1
}

// The readiness probe's patience: below its timeoutSeconds (internal/engine/netdpod).
const (
	probeWait  = 5 * time.Second
	probeRetry = 20 * time.Millisecond
)

// probeOnce sends one query, ID 0x4c5a, "probe.lazaret.invalid." A IN,
// and accepts any answer to it.
func probeOnce(target string) error {
	c, err := net.Dial("udp", target)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	q := []byte{0x4c, 0x5a, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
		5, 'p', 'r', 'o', 'b', 'e', 7, 'l', 'a', 'z', 'a', 'r', 'e', 't', 7, 'i', 'n', 'v', 'a', 'l', 'i', 'd', 0, 0, 1, 0, 1}
	if _, err := c.Write(q); err != nil {
		return err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if n < 12 || buf[0] != 0x4c || buf[1] != 0x5a || buf[2]&0x80 == 0 {
		return fmt.Errorf("not an answer to the probe")
	}
	return nil
}

func run(args []string) int {
	fs := flag.NewFlagSet("lazaret-netd", flag.ContinueOnError)
	var (
		policyJSON = fs.String("policy", "{}", "initial policy as JSON (allow_egress, allow_domains)")
		policyFile = fs.String("policy-file", "", "read the initial policy (the JSON of --policy) from this file (pod mode: a ConfigMap)")
		secretsF   = fs.String("secrets-file", "", "pod mode: the secrets' hosts and placeholders (JSON, no values); ca.crt and roots.pem beside it")
		secretDir  = fs.String("secret-dir", "", "pod mode: directory of the secret values and the CA key (a Kubernetes Secret mounted into netd only)")
		pod        = fs.Bool("pod", false, "pod mode (Kubernetes): DNS allowlist resolver only, no firewall; the policy from --policy-file")
		control    = fs.String("control", "", "path of the control socket to create")
		controlFD  = fs.Int("control-fd", 0, "inherited listening control socket descriptor")
		minTTL     = fs.Duration("min-ttl", 30*time.Second, "shortest time a resolved address stays allowed")
		maxTTL     = fs.Duration("max-ttl", time.Hour, "longest TTL of the answers returned")
		grace      = fs.Duration("dns-grace", netd.DefaultGrace, "how long a resolved address stays allowed at least after the last answer naming it")
		spare      = fs.Duration("spare-expiry", 0, "start as a spare: wait for a claim on the control socket, exit if none came within this time")
		spareKey   = fs.String("spare-key", "", "with --spare-expiry: the key a claim must name")
		hostAddrs  hostList
		resolvConf = fs.String("resolv-conf", "/etc/resolv.conf", "where to find upstream nameservers when --upstream is not given")
		upstreams  addrList
		listen     addrList
	)
	fs.Var(&upstreams, "upstream", "upstream DNS server address[:port] (repeatable)")
	fs.Var(&hostAddrs, "host-addr", "an address of the host, which no DNS answer opens (repeatable)")
	fs.Var(&listen, "listen", "resolver address[:port] (repeatable; default 127.0.0.1:53 and [::1]:53)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 { // a verb this netd does not know must not start a second daemon
		fmt.Fprintf(os.Stderr, "lazaret-netd: unexpected argument %q (verbs: probe, ctl, version)\n", fs.Arg(0))
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "netd")
	p, err := loadPolicy(*pod, *policyFile, *policyJSON, fs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lazaret-netd: %v\n", err)
		return 2
	}
	if *pod && len(upstreams) == 0 {
		// The pod's resolv.conf names netd itself (dnsPolicy None).
		fmt.Fprintln(os.Stderr, "lazaret-netd: --pod needs --upstream (the cluster DNS)")
		return 2
	}
	if len(upstreams) == 0 {
		upstreams = nameservers(*resolvConf)
	}
	if len(upstreams) == 0 {
		log.Warn("no upstream nameserver: allowed names will fail to resolve")
	}
	secrets, err := podSecrets(*secretsF, *secretDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lazaret-netd: --secrets-file: %v\n", err)
		return 2
	}
	d, err := netd.New(netd.Config{
		Policy: p, Upstreams: upstreams, Listen: listen, NoFirewall: *pod, Secrets: secrets,
		ControlPath: *control, ControlFD: *controlFD,
		MinTTL: *minTTL, MaxTTL: *maxTTL, Grace: *grace, HostAddrs: hostAddrs, SpareExpiry: *spare, SpareKey: *spareKey, Log: log,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "lazaret-netd: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if secrets != nil {
		var names []string
		for _, s := range secrets.Secrets {
			names = append(names, s.Name)
		}
		go d.WatchPodSecrets(ctx, *secretDir, names, netd.PodSecretPoll)
	}
	if err := d.Run(ctx); err != nil {
		// Fail closed: the sidecar exits and the sandbox does not start.
		fmt.Fprintf(os.Stderr, "lazaret-netd: %v\n", err)
		return 1
	}
	return 0
}

// podSecrets reads pod mode's secrets (nil without --secrets-file).
func podSecrets(file, dir string) (*netdapi.Request, error) {
	if file == "" {
		return nil, nil
	}
	req, err := netd.LoadPodSecrets(file, dir)
	if err != nil {
		return nil, err
	}
	return &req, nil
}

// loadPolicy returns the policy of --policy-file or else --policy. Pod
// mode needs the file: its policy is the pod's ConfigMap.
func loadPolicy(pod bool, file, inline string, fs *flag.FlagSet) (netpolicy.Policy, error) {
	inlineSet := false
	fs.Visit(func(f *flag.Flag) { inlineSet = inlineSet || f.Name == "policy" })
	switch {
	case file != "" && inlineSet:
		return netpolicy.Policy{}, errors.New("--policy and --policy-file: give one")
	case file != "":
		return netd.LoadPolicyFile(file)
	case pod:
		return netpolicy.Policy{}, errors.New("--pod needs --policy-file")
	}
	p, err := netd.ParsePolicy([]byte(inline))
	if err != nil {
		return netpolicy.Policy{}, fmt.Errorf("--policy: %w", err)
	}
	return p, nil
}

// nameservers reads the non-loopback nameservers of a resolv.conf: the
// namespace's uplink resolvers (loopback ones would be netd itself).
func nameservers(path string) addrList {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out addrList
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil || a.IsLoopback() || a.IsUnspecified() {
			continue
		}
		out = append(out, netip.AddrPortFrom(a.Unmap(), 53))
	}
	return out
}
