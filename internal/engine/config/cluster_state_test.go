package config

import "testing"

func TestClusterStateKeys(t *testing.T) {
	testEnv(t)
	c := mustParse(t, "")
	if c.Cluster.StorageClass != "" || c.Cluster.StateSize != DefaultStateSize {
		t.Errorf("defaults: class %q size %q", c.Cluster.StorageClass, c.Cluster.StateSize)
	}
	c = mustParse(t, `
[cluster]
storage_class = "standard-rwo"
state_size = "20Gi"
warm_pool = 3

[profiles.ws]
image = "x:1"
persist = "workspace"

[profiles.shared]
image = "x:1"

[profiles.nodirs]
image = "x:1"
persist = "workspace"
persistent_dirs = []
`)
	if c.Cluster.StorageClass != "standard-rwo" || c.Cluster.StateSize != "20Gi" {
		t.Errorf("cluster: %+v", c.Cluster)
	}
	// [cluster].warm_pool does not apply to per-workspace state; it does
	// to the others (control).
	for name, want := range map[string]int{"ws": 0, "shared": 3, "nodirs": 3} {
		if n := c.WarmPoolOf(c.Profiles[name]); n != want {
			t.Errorf("warm pool of %s = %d, want %d", name, n, want)
		}
	}
}

func TestClusterStateErrors(t *testing.T) {
	testEnv(t)
	cases := []struct{ doc, key, msg string }{
		{"[cluster]\nstorage_class = \"Not A Class\"\n", "cluster.storage_class", "invalid storage_class"},
		{"[cluster]\nstorage_class = \"\"\n", "cluster.storage_class", "invalid storage_class"},
		{"[cluster]\nstorage_class = 3\n", "cluster.storage_class", "want a string"},
		{"[cluster]\nstate_size = \"10GB\"\n", "cluster.state_size", "invalid state_size \"10GB\""},
		{"[cluster]\nstate_size = \"0Gi\"\n", "cluster.state_size", "invalid state_size"},
		{"[profiles.pp]\nimage = \"x:1\"\npersist = \"workspace\"\nwarm_pool = 2\n", "profiles.pp.warm_pool", "warm_pool 2 with persist = \"workspace\""},
	}
	for _, c := range cases {
		wantErr(t, c.doc, c.key, c.msg, false)
	}
	// Control: the same warm pool with persist = "profile" is fine.
	mustParse(t, "[profiles.pp]\nimage = \"x:1\"\npersist = \"profile\"\nwarm_pool = 2\n")
}
