package config

import (
	"net/netip"
	"regexp"
	"strings"
)

// Cluster is the [cluster] section: where and how the Kubernetes backend
// (lazaret-kube) runs sandboxes.
type Cluster struct {
	// Kubeconfig is the kubeconfig file (expanded); empty means client-go's
	// default ($KUBECONFIG, else ~/.kube/config).
	Kubeconfig string
	// Context is the kubeconfig context; empty means its current one.
	Context string
	// Namespace holds lazaret's objects; empty means the context's
	// namespace, else "default".
	Namespace string
	// RuntimeClass is the RuntimeClass of every sandbox pod (gVisor).
	RuntimeClass string
	// ImagePullPolicy is the agent container's imagePullPolicy.
	ImagePullPolicy string
	// AllowUnenforcedEgress starts sandboxes that need egress limits on a
	// cluster where NetworkPolicy enforcement is not proven.
	AllowUnenforcedEgress bool
	// WarmPool is the warm pool size of a profile without warm_pool.
	WarmPool int
	// ProbeImage is the image of the NetworkPolicy enforcement probe's
	// pods; empty means the profile's image.
	ProbeImage string
	// CPU and Memory are the agent container's requests and limits
	// (Kubernetes quantities: "2", "500m"; "4Gi"); empty sets none.
	CPU    string
	Memory string
	// NetdImage is the network sidecar's image (empty: this build's
	// localhost/lazaret-netd:<version>, as `lazaret image build` tags it).
	NetdImage string
	// DNS are the resolvers the sidecar forwards allowed names to (empty:
	// the cluster's kube-dns Service).
	DNS []netip.AddrPort
	// StorageClass is the StorageClass of the persistent dirs' PVCs
	// (empty: the cluster's default class).
	StorageClass string
	// StateSize is the storage each of those PVCs requests.
	StateSize string
}

// Defaults of [cluster].
const (
	DefaultRuntimeClass    = "gvisor"
	DefaultImagePullPolicy = "IfNotPresent"
	// MaxWarmPool bounds warm_pool: each warm sandbox is a running pod.
	MaxWarmPool = 50
	// DefaultStateSize is the storage a persistent dirs' PVC requests.
	DefaultStateSize = "10Gi"
)

type fileCluster struct {
	Kubeconfig            *string  `toml:"kubeconfig"`
	Context               *string  `toml:"context"`
	Namespace             *string  `toml:"namespace"`
	RuntimeClass          *string  `toml:"runtime_class"`
	ImagePullPolicy       *string  `toml:"image_pull_policy"`
	AllowUnenforcedEgress *bool    `toml:"allow_unenforced_egress"`
	WarmPool              *int64   `toml:"warm_pool"`
	ProbeImage            *string  `toml:"probe_image"`
	CPU                   *string  `toml:"cpu"`
	Memory                *string  `toml:"memory"`
	NetdImage             *string  `toml:"netd_image"`
	DNS                   []string `toml:"dns"`
	StorageClass          *string  `toml:"storage_class"`
	StateSize             *string  `toml:"state_size"`
}

var (
	cpuRE    = regexp.MustCompile(`^([0-9]{1,6}(\.[0-9]{1,3})?|[0-9]{1,9}m)$`)
	memoryRE = regexp.MustCompile(`^[0-9]{1,15}(Ki|Mi|Gi|Ti|k|M|G|T)?$`)
)

var dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// ValidNamespace checks a Kubernetes namespace name (an RFC 1123 label).
func ValidNamespace(s string) error {
	if len(s) > 63 || !dnsLabelRE.MatchString(s) {
		return ruleErrf("invalid namespace %s: lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit", quoteValue(s))
	}
	return nil
}

// cluster builds cfg.Cluster from [cluster], with defaults.
func (v *validator) cluster(fc *fileConfig, cfg *Config) {
	c := Cluster{RuntimeClass: DefaultRuntimeClass, ImagePullPolicy: DefaultImagePullPolicy, StateSize: DefaultStateSize}
	f := fc.Cluster
	key := keyPath{"cluster"}
	if f.Kubeconfig != nil {
		var p string
		err := ruleErrf("tokens are not allowed here")
		if !strings.ContainsAny(*f.Kubeconfig, "{}") {
			p, err = expandString(*f.Kubeconfig, func(string) string { return "" })
		}
		if err != nil {
			v.fail(key.child("kubeconfig"), err)
		}
		c.Kubeconfig = p
	}
	if f.Context != nil {
		if *f.Context == "" || strings.ContainsFunc(*f.Context, isControl) {
			v.fail(key.child("context"), ruleErrf("invalid context %s: a non-empty name without control characters", quoteValue(*f.Context)))
		}
		c.Context = *f.Context
	}
	if f.Namespace != nil {
		if err := ValidNamespace(*f.Namespace); err != nil {
			v.fail(key.child("namespace"), err)
		}
		c.Namespace = *f.Namespace
	}
	if f.RuntimeClass != nil {
		if len(*f.RuntimeClass) > 253 || !dnsSubdomainRE.MatchString(*f.RuntimeClass) {
			v.fail(key.child("runtime_class"), ruleErrf("invalid runtime_class %s: a DNS subdomain name such as \"gvisor\"", quoteValue(*f.RuntimeClass)))
		}
		c.RuntimeClass = *f.RuntimeClass
	}
	if f.ImagePullPolicy != nil {
		switch *f.ImagePullPolicy {
		case "Always", "IfNotPresent", "Never":
		default:
			v.fail(key.child("image_pull_policy"), ruleErrf("invalid image_pull_policy %s: want \"Always\", \"IfNotPresent\" or \"Never\"", quoteValue(*f.ImagePullPolicy)))
		}
		c.ImagePullPolicy = *f.ImagePullPolicy
	}
	if f.AllowUnenforcedEgress != nil {
		c.AllowUnenforcedEgress = *f.AllowUnenforcedEgress
	}
	c.WarmPool = v.warmPool(key.child("warm_pool"), f.WarmPool, 0)
	if f.ProbeImage != nil {
		if _, err := checkImage(*f.ProbeImage); err != nil {
			v.fail(key.child("probe_image"), err)
		}
		c.ProbeImage = *f.ProbeImage
	}
	if f.CPU != nil {
		if !cpuRE.MatchString(*f.CPU) || strings.Trim(*f.CPU, "0.m") == "" {
			v.fail(key.child("cpu"), ruleErrf("invalid cpu %s: a positive Kubernetes quantity such as \"2\" or \"500m\"", quoteValue(*f.CPU)))
		}
		c.CPU = *f.CPU
	}
	if f.Memory != nil {
		if !memoryRE.MatchString(*f.Memory) || strings.Trim(*f.Memory, "0KMGTik") == "" {
			v.fail(key.child("memory"), ruleErrf("invalid memory %s: a positive Kubernetes quantity such as \"4Gi\" or \"512Mi\"", quoteValue(*f.Memory)))
		}
		c.Memory = *f.Memory
	}
	v.clusterNetwork(f, &c, key)
	v.clusterState(f, &c, key)
	cfg.Cluster = c
}

// maxClusterDNS bounds [cluster].dns (resolv.conf's own limit).
const maxClusterDNS = 3

// clusterNetwork reads the network sidecar's keys of [cluster].
func (v *validator) clusterNetwork(f fileCluster, c *Cluster, key keyPath) {
	if f.NetdImage != nil {
		if _, err := checkImage(*f.NetdImage); err != nil {
			v.fail(key.child("netd_image"), err)
		}
		c.NetdImage = *f.NetdImage
	}
	if len(f.DNS) > maxClusterDNS {
		v.fail(key.child("dns"), ruleErrf("%d resolvers: at most %d", len(f.DNS), maxClusterDNS))
		return
	}
	for _, s := range f.DNS {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			var a netip.Addr
			if a, err = netip.ParseAddr(s); err == nil {
				ap = netip.AddrPortFrom(a, 53)
			}
		}
		if err != nil || ap.Port() == 0 || !ap.Addr().IsValid() || ap.Addr().IsUnspecified() {
			v.fail(key.child("dns"), ruleErrf("invalid resolver %s: an IP address, or IP:port", quoteValue(s)))
			continue
		}
		c.DNS = append(c.DNS, ap)
	}
}

// warmPool checks a warm_pool value (nil: def).
func (v *validator) warmPool(key keyPath, n *int64, def int) int {
	if n == nil {
		return def
	}
	if *n < 0 || *n > MaxWarmPool {
		v.fail(key, ruleErrf("invalid warm_pool %d: want 0 (no warm pool) to %d", *n, MaxWarmPool))
		return def
	}
	return int(*n)
}

// WarmPoolOf is the warm pool size of p on the cluster: its own warm_pool,
// else [cluster].warm_pool, which does not apply to a profile whose
// persistent dirs are kept per workspace (StatePerWorkspace).
func (c *Config) WarmPoolOf(p *Profile) int {
	if p.WarmPool != nil {
		return *p.WarmPool
	}
	if p.StatePerWorkspace() {
		return 0
	}
	return c.Cluster.WarmPool
}
