package config

import "testing"

func TestClusterDefaults(t *testing.T) {
	testEnv(t)
	c := mustParse(t, "")
	if c.Cluster.RuntimeClass != "gvisor" || c.Cluster.ImagePullPolicy != "IfNotPresent" || c.Cluster.WarmPool != 0 || c.Cluster.AllowUnenforcedEgress {
		t.Errorf("defaults: %+v", c.Cluster)
	}
	if n := c.WarmPoolOf(c.Profiles["default"]); n != 0 {
		t.Errorf("default warm pool %d", n)
	}
}

func TestClusterSection(t *testing.T) {
	testEnv(t)
	c := mustParse(t, `
[cluster]
kubeconfig = "~/kc"
context = "ci"
namespace = "agents"
runtime_class = "gvisor-systrap"
image_pull_policy = "Never"
allow_unenforced_egress = true
warm_pool = 2
probe_image = "busybox:1.36"
cpu = "1500m"
memory = "4Gi"
netd_image = "reg.example/netd:2"
dns = ["10.96.0.10", "192.0.2.53:5353"]

[profiles.dev]
image = "x:1"
warm_pool = 0

[profiles.hot]
image = "x:1"
`)
	cl := c.Cluster
	if cl.Context != "ci" || cl.Namespace != "agents" || cl.RuntimeClass != "gvisor-systrap" || cl.ImagePullPolicy != "Never" ||
		!cl.AllowUnenforcedEgress || cl.WarmPool != 2 || cl.ProbeImage != "busybox:1.36" || cl.CPU != "1500m" || cl.Memory != "4Gi" || cl.Kubeconfig == "~/kc" || cl.Kubeconfig == "" {
		t.Errorf("cluster: %+v", cl)
	}
	if cl.NetdImage != "reg.example/netd:2" || len(cl.DNS) != 2 || cl.DNS[0].String() != "10.96.0.10:53" || cl.DNS[1].String() != "192.0.2.53:5353" {
		t.Errorf("cluster network: %q %v", cl.NetdImage, cl.DNS)
	}
	if n := c.WarmPoolOf(c.Profiles["dev"]); n != 0 {
		t.Errorf("dev warm pool %d, want its own 0", n)
	}
	if n := c.WarmPoolOf(c.Profiles["hot"]); n != 2 {
		t.Errorf("hot warm pool %d, want the cluster's 2", n)
	}
}

func TestClusterErrors(t *testing.T) {
	testEnv(t)
	cases := []struct{ doc, key, msg string }{
		{"[cluster]\nnamespace = \"Bad_NS\"\n", "cluster.namespace", "invalid namespace"},
		{"[cluster]\nruntime_class = \"a b\"\n", "cluster.runtime_class", "invalid runtime_class"},
		{"[cluster]\nimage_pull_policy = \"sometimes\"\n", "cluster.image_pull_policy", "invalid image_pull_policy"},
		{"[cluster]\nwarm_pool = -1\n", "cluster.warm_pool", "invalid warm_pool -1"},
		{"[cluster]\nwarm_pool = \"2\"\n", "cluster.warm_pool", "wrong type: got string, want an integer"},
		{"[cluster]\nallow_unenforced_egress = \"yes\"\n", "cluster.allow_unenforced_egress", "want a boolean"},
		{"[cluster]\ncontext = \"\"\n", "cluster.context", "invalid context"},
		{"[cluster]\nkubeconfig = \"{profile_name}\"\n", "cluster.kubeconfig", "tokens are not allowed"},
		{"[cluster]\ncpu = \"lots\"\n", "cluster.cpu", "invalid cpu \"lots\""},
		{"[cluster]\ncpu = \"0\"\n", "cluster.cpu", "invalid cpu"},
		{"[cluster]\nmemory = \"4GB\"\n", "cluster.memory", "invalid memory \"4GB\""},
		{"[cluster]\nnamspace = \"x\"\n", "cluster.namspace", "unknown key"},
		{"[cluster]\ndns = [\"nope\"]\n", "cluster.dns", "invalid resolver \"nope\""},
		{"[cluster]\ndns = [\"0.0.0.0\"]\n", "cluster.dns", "invalid resolver"},
		{"[cluster]\ndns = [\"1.1.1.1\", \"1.0.0.1\", \"8.8.8.8\", \"8.8.4.4\"]\n", "cluster.dns", "at most 3"},
		{"[cluster]\ndns = \"1.1.1.1\"\n", "cluster.dns", "want an array of strings"},
		{"[cluster]\nnetd_image = \"Bad Image\"\n", "cluster.netd_image", "invalid image reference"},
		{"[profiles.pp]\nimage = \"x:1\"\nwarm_pool = 1000\n", "profiles.pp.warm_pool", "want 0 (no warm pool) to 50"},
		{"[profiles.pp]\nimage = \"x:1\"\nwarm_pool = 1.5\n", "profiles.pp.warm_pool", "wrong type: got float, want an integer"},
	}
	for _, c := range cases {
		wantErr(t, c.doc, c.key, c.msg, false)
	}
}
