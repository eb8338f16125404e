package config

import "strings"

// clusterState reads the keys of [cluster] for the persistent dirs' PVCs
// (the State Anchor on the Kubernetes backend).
func (v *validator) clusterState(f fileCluster, c *Cluster, key keyPath) {
	if f.StorageClass != nil {
		if len(*f.StorageClass) > 253 || !dnsSubdomainRE.MatchString(*f.StorageClass) {
			v.fail(key.child("storage_class"), ruleErrf("invalid storage_class %s: a StorageClass name such as \"standard-rwo\" (omit the key for the cluster's default class)", quoteValue(*f.StorageClass)))
		}
		c.StorageClass = *f.StorageClass
	}
	if f.StateSize != nil {
		if !memoryRE.MatchString(*f.StateSize) || strings.Trim(*f.StateSize, "0KMGTik") == "" {
			v.fail(key.child("state_size"), ruleErrf("invalid state_size %s: a positive Kubernetes quantity such as \"10Gi\"", quoteValue(*f.StateSize)))
		}
		c.StateSize = *f.StateSize
	}
}

// StatePerWorkspace reports whether p keeps persistent dirs per workspace
// (persist = "workspace"): on the cluster each workspace then has its own
// PVC, named in its own template, which a warm pool shared by the
// profile's workspaces cannot serve.
func (p *Profile) StatePerWorkspace() bool {
	return len(p.PersistentDirs) > 0 && p.Persist == PersistWorkspace
}

// warmPoolState refuses a warm pool for a profile whose persistent dirs
// are per workspace (see StatePerWorkspace).
func (v *validator) warmPoolState(p *Profile, key keyPath) {
	if p.WarmPool != nil && *p.WarmPool > 0 && p.StatePerWorkspace() {
		v.fail(key.child("warm_pool"), ruleErrf("warm_pool %d with persist = \"workspace\": on the cluster each workspace's persistent dirs are its own PVC, which a shared warm pool cannot mount; set warm_pool = 0, persist = \"profile\", or persistent_dirs = []", *p.WarmPool))
	}
}
