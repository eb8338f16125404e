package hostres

import (
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

func TestMemTotal(t *testing.T) {
	n, err := memTotal([]byte("MemFree: 1 kB\nMemTotal:       24683720 kB\n"))
	if err != nil || n != 24683720<<10 {
		t.Fatalf("%d, %v", n, err)
	}
	if _, err := memTotal([]byte("MemFree: 1 kB\n")); err == nil {
		t.Fatal("no MemTotal accepted")
	}
}

func TestProbe(t *testing.T) {
	h, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	if h.TotalRAM < 64<<20 || len(h.CPUs) == 0 {
		t.Fatalf("%+v", h)
	}
}

func TestDecide(t *testing.T) {
	h := Host{TotalRAM: 16 << 30, CPUs: []int{0, 1, 2, 3}}
	p, err := Decide("pp", config.Resources{Pids: 100, DiskReserve: config.DefaultDiskReserve}, h)
	if err != nil {
		t.Fatal(err)
	}
	if p.Memory != 16<<30/5*2 || p.Pids != 100 || p.Sched.Nice != SandboxNice || p.Sched.IOLevel != SandboxIOLevel || p.Sched.CPUs != nil {
		t.Errorf("defaults: %+v", p)
	}
	if len(p.Limits) != 4 || !strings.Contains(p.Limits[0].Value, "40% of the host's RAM") {
		t.Errorf("limits: %+v", p.Limits)
	}
	p, err = Decide("pp", config.Resources{CPUs: 2, Memory: 1 << 30}, h)
	if err != nil || !slices.Equal(p.Sched.CPUs, []int{2, 3}) || p.Memory != 1<<30 || p.Pids != config.DefaultPids {
		t.Errorf("cpus = 2: %+v, %v", p, err)
	}
	if _, err := Decide("pp", config.Resources{CPUs: 1.5}, h); err == nil || !strings.Contains(err.Error(), "profiles.pp.cpus") || !strings.Contains(err.Error(), "best-effort") {
		t.Errorf("cpus = 1.5 enforced: %v", err)
	}
	p, err = Decide("pp", config.Resources{CPUs: 1.5, BestEffort: true}, h)
	if err != nil || !slices.Equal(p.Sched.CPUs, []int{2, 3}) || !p.Limits[1].BestEffort {
		t.Errorf("cpus = 1.5 best-effort: %+v, %v", p, err)
	}
	p, err = Decide("pp", config.Resources{CPUs: 8}, h)
	if err != nil || p.Sched.CPUs != nil {
		t.Errorf("cpus above the host's: %+v, %v", p, err)
	}
}

func TestFilesystem(t *testing.T) {
	dir := t.TempDir()
	total, free, err := Filesystem(dir)
	if err != nil || total == 0 || free > total {
		t.Fatalf("%d %d %v", total, free, err)
	}
	// A path not made yet is measured on its nearest existing ancestor.
	t2, _, err := Filesystem(dir + "/not/made/yet")
	if err != nil || t2 != total {
		t.Fatalf("not made yet: %d, %v; want %d", t2, err, total)
	}
}
