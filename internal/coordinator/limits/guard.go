package limits

import "time"

// The decisions, kept apart from the host so that tests drive them with a
// fake clock and fake usage.

// memAction is what the memory guard asks for after a sample.
type memAction int

const (
	memNone memAction = iota
	// memKill: kill the largest process inside the sandbox.
	memKill
	// memStop: the hard ceiling; stop the sandbox.
	memStop
)

// settleWait is how long a kill's memory gets to fall before another
// kill. gVisor returns a killed process's memory to the host within about
// two seconds (measured: 496 MiB resident, 385 MiB left at once, 18 MiB
// two seconds later); a usage still at the limit after settleWait only
// kills again when it grows (growthSlack).
const settleWait = time.Second

// growthSlack is how much the usage must grow, after a kill that left it
// above the limit, before the next kill: memory that no kill frees (a
// full tmpfs) must not kill one process after another, but an allocating
// process is killed as a VM's kernel would kill at its next allocation.
const growthSlack = 4 << 20

// Margin is how far above the limit the hard ceiling is: an eighth of
// the limit, at least 64 MiB, at most 256 MiB.
func Margin(limit int64) int64 {
	return min(max(limit/8, 64<<20), 256<<20)
}

// memGuard decides on each memory sample. Not safe for concurrent use.
type memGuard struct {
	limit, ceiling int64
	killing        bool      // a kill is under way
	lastKill       time.Time // when the last kill ended
	judged         bool      // the last kill's outcome was looked at once settled
	settled        int64     // the usage once the last kill settled at the limit; 0: none
	stopped        bool
}

func newMemGuard(limit int64) *memGuard {
	return &memGuard{limit: limit, ceiling: limit + Margin(limit)}
}

// step takes one sample of used bytes at now. The hard ceiling is checked
// at every sample, a kill under way or not.
func (g *memGuard) step(now time.Time, used int64) memAction {
	switch {
	case g.stopped:
		return memNone
	case used >= g.ceiling:
		g.stopped = true
		return memStop
	case g.killing || now.Sub(g.lastKill) < settleWait:
		return memNone
	case used < g.limit:
		g.settled, g.judged = 0, true
		return memNone
	case !g.lastKill.IsZero() && !g.judged:
		// The last kill has settled and the usage is still at the limit:
		// what holds it is not a process (a full tmpfs), or not only one.
		// Kill again only when it grows.
		g.judged, g.settled = true, used
		return memNone
	case g.settled != 0 && used < g.settled+growthSlack:
		return memNone
	}
	g.killing = true
	return memKill
}

// killDone records the end of a kill at now.
func (g *memGuard) killDone(now time.Time) {
	g.killing, g.lastKill, g.judged, g.settled = false, now, false, 0
}

// nearInterval and farInterval are the poll intervals: near a limit every
// 10 ms, else every 50 ms (an fstat and a 40-byte read each).
const (
	farInterval  = 50 * time.Millisecond
	nearInterval = 10 * time.Millisecond
	// diskFarEvery: far from the reserve, the disk is checked every
	// diskFarEvery memory polls (100 ms).
	diskFarEvery = 2
	// diskNear: closer than this to the reserve, the disk is checked at
	// every poll (1 GiB is more than half a second of the fastest write
	// measured here, 1.8 GB/s).
	diskNear = 1 << 30
)

// near reports whether used is close enough to the limit to poll fast.
func (g *memGuard) near(used int64) bool {
	return g.killing || used >= g.limit-g.limit/4
}

// diskGuard keeps a reserve on one filesystem.
type diskGuard struct {
	reserve, hysteresis uint64
	paused              bool
}

// Hysteresis is how much above the reserve free space must be before a
// paused sandbox resumes: a tenth of the reserve, at least 64 MiB, at most
// 256 MiB (a 5% reserve of a large disk is tens of GiB).
func Hysteresis(reserve uint64) uint64 { return min(max(reserve/10, 64<<20), 256<<20) }

func newDiskGuard(reserve uint64) *diskGuard {
	return &diskGuard{reserve: reserve, hysteresis: Hysteresis(reserve)}
}

// diskAction is what the disk guard asks for after a sample.
type diskAction int

const (
	diskNone diskAction = iota
	diskPause
	diskResume
)

// step takes one sample of free bytes.
func (g *diskGuard) step(free uint64) diskAction {
	if g.reserve == 0 {
		return diskNone
	}
	switch {
	case !g.paused && free < g.reserve:
		g.paused = true
		return diskPause
	case g.paused && free >= g.reserve+g.hysteresis:
		g.paused = false
		return diskResume
	}
	return diskNone
}

// resumeAt is the free space at which a paused sandbox resumes.
func (g *diskGuard) resumeAt() uint64 { return g.reserve + g.hysteresis }

// near reports whether free is close enough to the reserve to check it at
// every poll.
func (g *diskGuard) near(free uint64) bool {
	return g.reserve > 0 && (g.paused || free < g.reserve+diskNear)
}
