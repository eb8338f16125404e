package doctor

import (
	"fmt"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/hostres"
)

// checkLimits says how this host holds each profile's resource limits
// (memory, cpus, pids, disk_reserve), and fails a limit it cannot hold
// or a disk reserve the data root's filesystem cannot keep.
func checkLimits(cfg *config.Config) []Result {
	host, err := hostres.Probe()
	if err != nil {
		return []Result{fail("limits", err.Error(), "")}
	}
	var rs []Result
	var total, free uint64
	if cfg.DataRoot != "" {
		total, free, _ = hostres.Filesystem(cfg.DataRoot)
	}
	mechanisms := map[string]string{}
	var order []string
	for _, name := range cfg.ProfileNames() {
		p := cfg.Profiles[name]
		plan, err := hostres.Decide(name, p.Resources, host)
		if err != nil {
			rs = append(rs, fail("limits of "+name, err.Error(), "use a whole number of cpus, or set limits = \"best-effort\" in the profile (docs/CONFIG.md)"))
			continue
		}
		var parts []string
		for _, l := range plan.Limits {
			v := l.Name + " " + l.Value
			if l.BestEffort {
				v += " (best-effort)"
			}
			parts = append(parts, v)
			key := l.Name
			if _, ok := mechanisms[key]; !ok {
				order = append(order, key)
			}
			mechanisms[key] = l.Mechanism
		}
		rs = append(rs, pass("limits of "+name, strings.Join(parts, ", ")))
		if total > 0 {
			r := p.Resources.DiskReserve
			if err := r.Check(total); err != nil {
				rs = append(rs, fail("disk reserve of "+name, err.Error()+" holding "+cfg.DataRoot, "lower disk_reserve in profile "+name+" (docs/CONFIG.md)"))
			} else if keep := r.Of(total); free < keep {
				res := fail("disk reserve of "+name, fmt.Sprintf("%s free on the data root's filesystem, below the reserve %s: a sandbox pauses at once", config.FormatSize(int64(free)), config.FormatSize(int64(keep))), "free space on the filesystem of "+cfg.DataRoot+", or lower disk_reserve")
				res.Warning = true
				rs = append(rs, res)
			}
		}
	}
	for _, k := range order {
		rs = append(rs, pass("how "+k+" is held", mechanisms[k]))
	}
	return rs
}
