package doctor

import (
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

func TestCheckLimits(t *testing.T) {
	cfg := &config.Config{DataRoot: t.TempDir() + "/not/made/yet", Profiles: map[string]*config.Profile{
		"default": {Name: "default", Resources: config.Resources{Pids: 4096, DiskReserve: config.DefaultDiskReserve}},
		"frac":    {Name: "frac", Resources: config.Resources{CPUs: 1.5}},
		"huge":    {Name: "huge", Resources: config.Resources{DiskReserve: config.DiskReserve{Bytes: 1 << 60}}},
	}}
	byName := map[string]Result{}
	for _, r := range checkLimits(cfg) {
		byName[r.Name] = r
	}
	if r := byName["limits of default"]; !r.OK || !strings.Contains(r.Detail, "40% of the host's RAM") {
		t.Errorf("default: %+v", r)
	}
	if r := byName["limits of frac"]; r.OK || !strings.Contains(r.Detail, "profiles.frac.cpus") {
		t.Errorf("frac: %+v", r)
	}
	if r := byName["disk reserve of huge"]; r.OK || r.Warning || !strings.Contains(r.Detail, "larger than the filesystem") {
		t.Errorf("huge: %+v", r)
	}
	if r := byName["how memory is held"]; !r.OK || !strings.Contains(r.Detail, "watchdog") {
		t.Errorf("memory mechanism: %+v", r)
	}
}
