package config

import (
	"strings"
	"testing"
)

func TestResourcesDefaultsAndInheritance(t *testing.T) {
	c := mustParse(t, `
[resources]
memory = "8g"
cpus = 2

[profiles.aa]
image = "x:1"
memory = "512MiB"
cpus = 1.5
pids = 256
disk_reserve = "10%"
limits = "best-effort"

[profiles.bb]
image = "x:1"
disk_reserve = "2g"
`)
	a, b, d := c.Profiles["aa"].Resources, c.Profiles["bb"].Resources, c.Profiles[DefaultProfileName].Resources
	if a.Memory != 512<<20 || a.CPUs != 1.5 || a.Pids != 256 || a.DiskReserve.Percent != 10 || !a.BestEffort {
		t.Errorf("a = %+v", a)
	}
	if b.Memory != 8<<30 || b.CPUs != 2 || b.Pids != DefaultPids || b.DiskReserve.Bytes != 2<<30 || b.BestEffort {
		t.Errorf("b = %+v (want the [resources] values)", b)
	}
	if d.Memory != 8<<30 || d.DiskReserve != DefaultDiskReserve {
		t.Errorf("default = %+v", d)
	}
	if none := mustParse(t, "").Profiles[DefaultProfileName].Resources; none.Memory != 0 || none.Pids != DefaultPids || none.DiskReserve != DefaultDiskReserve {
		t.Errorf("built-in = %+v", none)
	}
}

func TestResourcesBadInput(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`memory = "0"`, `profiles.pp.memory: invalid memory "0"`},
		{`memory = "-1g"`, `profiles.pp.memory: invalid memory "-1g"`},
		{`memory = "lots"`, `profiles.pp.memory: invalid memory "lots"`},
		{`memory = "100m"`, `at least 128m`},
		{`memory = 8`, `profiles.pp.memory: wrong type: got integer, want a string`},
		{`cpus = 0`, `profiles.pp.cpus: invalid cpus 0`},
		{`cpus = -1.5`, `profiles.pp.cpus: invalid cpus -1.5`},
		{`cpus = "2"`, `profiles.pp.cpus: wrong type: got string, want a number`},
		{`pids = 3`, `profiles.pp.pids: invalid pids 3`},
		{`disk_reserve = "lots"`, `profiles.pp.disk_reserve: invalid disk_reserve "lots"`},
		{`disk_reserve = "100%"`, `profiles.pp.disk_reserve: invalid disk_reserve "100%"`},
		{`disk_reserve = "-5%"`, `profiles.pp.disk_reserve: invalid disk_reserve "-5%"`},
		{`limits = "maybe"`, `profiles.pp.limits: invalid limits "maybe"`},
	} {
		_, err := parse(t, "[profiles.pp]\nimage = \"x:1\"\n"+tc.doc+"\n")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line containing %q", tc.doc, err, tc.want)
		}
	}
	if _, err := parse(t, "[resources]\nmemory = \"lots\"\n"); err == nil || !strings.Contains(err.Error(), "resources.memory") {
		t.Errorf("[resources] memory: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"8g": 8 << 30, "512m": 512 << 20, "512MiB": 512 << 20, "4Gi": 4 << 30, "1.5g": 3 << 29, "1048576": 1 << 20, "2T": 2 << 40, "64k": 64 << 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "g", "-1g", "1e9", "0x10", "lots", "1 g", "+5g", "NaN", "Inf"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestDiskReserveOf(t *testing.T) {
	const gib = 1 << 30
	if r := (DiskReserve{Percent: 5}).Of(100 * gib); r != 5*gib {
		t.Errorf("5%% of 100g = %d", r)
	}
	if r := (DiskReserve{Percent: 5}).Of(10 * gib); r != gib {
		t.Errorf("5%% of 10g = %d, want the 1g floor", r)
	}
	if r := (DiskReserve{Percent: 5}).Of(gib); r != gib/2 {
		t.Errorf("5%% of 1g = %d, want half the disk", r)
	}
	if err := (DiskReserve{Bytes: 20 * gib}).Check(10 * gib); err == nil || !strings.Contains(err.Error(), "larger than the filesystem") {
		t.Errorf("20g reserve on 10g: %v", err)
	}
	if err := (DiskReserve{Bytes: 2 * gib}).Check(10 * gib); err != nil {
		t.Error(err)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"8g", "512MiB", "1.5g", "5%", "-1", "lots"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseSize(s)
		if err == nil && b < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, b)
		}
		if d, err := parseReserve(s); err == nil && (d.Bytes < 0 || d.Percent < 0 || d.Percent >= 100) {
			t.Fatalf("parseReserve(%q) = %+v", s, d)
		}
	})
}
