// Package limits is the coordinator's enforcement of a sandbox's memory
// limit and disk reserve on a host whose kernel gives the rootless user no
// cgroup controllers (cgroups v1, or v2 without delegation), where
// podman's --memory would do nothing. It watches the runsc Sentry from the
// host: its memory file's allocated blocks plus its own anonymous memory
// every 50 ms (10 ms near the limit), and the free space of the
// filesystems the sandbox writes.
//
// Memory: at the limit, the process with the largest resident memory
// inside the sandbox is killed by a trusted program run with runsc exec
// (cmd/lazaret-escalate's __oomkill verb, mounted read-only), as a VM's
// kernel would; the sandbox survives. At the limit plus a margin the kill
// was defeated or too slow: the Sentry is stopped at once (SIGSTOP) and
// the sandbox is torn down, its Sentry killed before the container is
// removed. Disk: below the reserve the sandbox is paused (SIGSTOP of the
// Sentry and its gofer) and resumes by itself once the reserve is free
// again. A rootless user has no quota to give the agent ENOSPC at the
// reserve, and the sandbox's writes are the host's own (the Sentry writes
// workspace files directly), so a pause is the one bound that holds.
// docs/SECURITY.md ("Resource limits") says what the agent sees and what
// is left.
package limits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/adapter/runscexec"
	"github.com/lazaret-dev/lazaret/internal/coordinator/procwatch"
	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/hostres"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/runscflags"
	"github.com/lazaret-dev/lazaret/internal/sched"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// Mechanism names how this component holds the memory limit (status,
// doctor: one text).
const Mechanism = hostres.MemoryWatchdog

// Broadcaster prints one line on every attached terminal (ctlserver.Server).
type Broadcaster interface {
	Broadcast(typ string, payload any)
}

// Options configure the component.
type Options struct {
	Profile *config.Profile
	Anchor  *domain.Anchor
	// EscalationEnabled: the escalation component mounts the Go client
	// (the OOM killer) already; otherwise this one does.
	EscalationEnabled bool
	Podman            *podman.Client
	Server            Broadcaster
	Audit             func(context.Context, audit.Entry) (uint64, error)
	Log               *slog.Logger
}

// sandboxHost is what the watch does to the sandbox (the real one:
// realHost; tests: a fake).
type sandboxHost interface {
	used() (int64, error)
	pause() error
	resume() error
	kill() error
	oomKill(ctx context.Context) (killed, error)
	close()
}

// Component enforces the memory limit and the disk reserve of one sandbox.
// It implements sandbox.Component, and the coordinator's Watcher and
// BeforeStopper.
type Component struct {
	o         Options
	limit     int64
	container string
	disks     []*fsWatch
	statfs    func(path string) (free, total uint64, err error)
	attach    func(ctx context.Context, container string) (sandboxHost, error)
	now       func() time.Time
	mem       *memGuard

	// watching is closed once Watch has reached the sandbox's processes
	// or given up (Freeze waits for it: a fork right after a start).
	watching     chan struct{}
	watchingOnce sync.Once

	mu        sync.Mutex
	host      sandboxHost
	used      int64
	kills     int
	paused    bool // for the disk reserve
	memStop   bool // the hard ceiling stopped the Sentry
	stopping  bool // BeforeStop or Close ran: no more pauses
	unwatched string
	lastSaid  map[string]time.Time
	quiet     map[string]int
}

// New returns the component; nothing happens before Prepare.
func New(o Options) *Component {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Podman == nil {
		o.Podman = &podman.Client{Log: o.Log}
	}
	c := &Component{o: o, statfs: statfs, now: time.Now, lastSaid: map[string]time.Time{}, quiet: map[string]int{}, watching: make(chan struct{})}
	c.attach = c.attachHost
	return c
}

// Name implements sandbox.Component.
func (c *Component) Name() string { return "limits" }

// Prepare checks the disk reserve of each filesystem the sandbox writes
// (a reserve the filesystem cannot keep, or free space already below it,
// is a start error naming disk_reserve) and mounts the OOM killer when
// the escalation component does not.
func (c *Component) Prepare(_ context.Context, spec *podman.ContainerSpec) error {
	r := c.o.Profile.Resources
	limit := r.MemoryOn(totalRAM())
	c.mu.Lock()
	c.limit = limit
	c.mem = newMemGuard(limit)
	c.mu.Unlock()
	disks, err := c.checkDisks([]string{c.o.Anchor.DataRoot, c.o.Anchor.Workspace})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.disks = disks
	c.mu.Unlock()
	if !c.o.EscalationEnabled {
		p, err := findGoClient()
		switch {
		case err == nil:
			spec.Mounts = append(spec.Mounts, podman.Mount{Type: "bind", Source: p, Target: escprompt.SandboxGoClient, ReadOnly: true})
		case r.BestEffort:
			c.o.Log.Warn("no OOM killer for the sandbox (limits = best-effort): the memory limit stops the sandbox instead", "err", err)
		default:
			return fmt.Errorf("memory %s: the sandbox's OOM killer (%s) is missing: %w", config.FormatSize(c.limit), locate.EscalateGo, err)
		}
	}
	return nil
}

// findGoClient locates lazaret-escalate-go (beside lazaret-escalate when
// only that is configured), as the escalation component does.
func findGoClient() (string, error) {
	p, err := locate.Find(locate.EscalateGo)
	if err == nil {
		return p, nil
	}
	if fe, ferr := locate.Find(locate.Escalate); ferr == nil {
		q := filepath.Join(filepath.Dir(fe), locate.EscalateGo)
		if fi, serr := os.Stat(q); serr == nil && fi.Mode().IsRegular() {
			return q, nil
		}
	}
	return "", err
}

// Started implements sandbox.Component: it only records the container;
// the watch begins after the start (Watch), off the start path.
func (c *Component) Started(_ context.Context, container string) error {
	c.mu.Lock()
	c.container = container
	c.mu.Unlock()
	return nil
}

// StopError is a limit that stopped the sandbox: its StopReason is the
// teardown reason every session is told.
type StopError struct{ Reason string }

func (e *StopError) Error() string      { return e.Reason }
func (e *StopError) StopReason() string { return e.Reason }

// Watch implements the coordinator's Watcher: it returns nil when ctx
// ends, or a *StopError when a limit stopped the sandbox.
func (c *Component) Watch(ctx context.Context) error {
	defer c.watched()
	c.mu.Lock()
	container := c.container
	c.mu.Unlock()
	h, err := c.attach(ctx, container)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.unenforced(ctx, err)
	}
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		h.close()
		return nil
	}
	c.host = h
	c.mu.Unlock()
	c.watched()
	return c.loop(ctx, h)
}

// unenforced handles a sandbox the watch cannot see: an error (the
// sandbox stops) unless the profile accepts best-effort limits.
func (c *Component) unenforced(ctx context.Context, err error) error {
	c.watched()
	msg := fmt.Sprintf("memory limit %s and disk_reserve cannot be enforced: %v", config.FormatSize(c.limit), err)
	c.o.Log.Error("limits", "err", msg)
	if !c.o.Profile.Resources.BestEffort {
		return &StopError{Reason: msg + "; the sandbox was stopped (limits = \"best-effort\" in profile " + c.o.Profile.Name + " runs it unbounded; docs/CONFIG.md)"}
	}
	c.mu.Lock()
	c.unwatched = err.Error()
	c.mu.Unlock()
	c.tell(ctx, "unenforced", map[string]string{"limit": "memory", "error": err.Error()},
		"lazaret: "+msg+" (limits = best-effort): the sandbox runs unbounded")
	<-ctx.Done()
	return nil
}

type killResult struct {
	k   killed
	err error
}

// loop polls the memory (and the disk, less often when far from its
// reserve) until ctx ends or a limit stops the sandbox.
func (c *Component) loop(ctx context.Context, h sandboxHost) error {
	kills := make(chan killResult, 1)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for tick := 0; ; tick++ {
		select {
		case <-ctx.Done():
			return nil
		case r := <-kills:
			c.killed(ctx, r)
			continue
		case <-timer.C:
		}
		used, err := h.used()
		if err != nil {
			// The Sentry is gone: the container watch tears down.
			c.o.Log.Info("limits: the sandbox's memory cannot be read any more", "err", err)
			<-ctx.Done()
			return nil
		}
		c.mu.Lock()
		c.used = used
		c.mu.Unlock()
		switch c.mem.step(c.now(), used) {
		case memStop:
			return c.hardStop(ctx, h, used)
		case memKill:
			go func() {
				start := time.Now()
				k, err := h.oomKill(ctx)
				c.o.Log.Info("limits: OOM kill", "took", time.Since(start).Round(time.Millisecond), "err", err)
				kills <- killResult{k, err}
			}()
		}
		near := c.mem.near(used)
		if dn := c.checkDisk(ctx, h, tick%diskFarEvery == 0); dn {
			near = true
		}
		if near {
			timer.Reset(nearInterval)
		} else {
			timer.Reset(farInterval)
		}
	}
}

// hardStop stops the Sentry at once and returns the teardown reason.
func (c *Component) hardStop(ctx context.Context, h sandboxHost, used int64) error {
	c.mu.Lock()
	c.memStop = true
	var err error
	if c.stopping {
		err = h.kill()
	} else {
		err = h.pause()
	}
	c.mu.Unlock()
	if err != nil {
		c.o.Log.Error("limits: stopping the sandbox", "err", err)
	}
	lim := config.FormatSize(c.limit)
	reason := fmt.Sprintf("memory limit %s exceeded (%s used, past the %s margin): the sandbox was stopped; raise memory in profile %s (docs/CONFIG.md)",
		lim, config.FormatSize(used), config.FormatSize(Margin(c.limit)), c.o.Profile.Name)
	c.record(ctx, "stopped", map[string]string{"limit": "memory", "memory": strconv.FormatInt(c.limit, 10), "used": strconv.FormatInt(used, 10)})
	c.o.Log.Error("limits: memory limit exceeded; stopping the sandbox", "limit", c.limit, "used", used)
	return &StopError{Reason: reason}
}

// killed tells the outcome of one OOM kill.
func (c *Component) killed(ctx context.Context, r killResult) {
	c.mem.killDone(c.now())
	c.mu.Lock()
	used := c.used
	if r.err == nil && !r.k.None {
		c.kills++
	}
	c.mu.Unlock()
	lim := config.FormatSize(c.limit)
	head := fmt.Sprintf("lazaret: memory limit %s reached (%s used)", lim, config.FormatSize(used))
	raise := "; raise memory in profile " + c.o.Profile.Name + " (docs/CONFIG.md)"
	fields := map[string]string{"limit": "memory", "memory": strconv.FormatInt(c.limit, 10), "used": strconv.FormatInt(used, 10)}
	switch {
	case r.err != nil:
		fields["error"] = r.err.Error()
		c.o.Log.Warn("limits: OOM kill failed", "err", r.err)
		c.tell(ctx, "oom_kill_failed", fields, head+": the OOM kill in the sandbox failed; the sandbox stops if it grows past "+
			config.FormatSize(c.limit+Margin(c.limit))+raise)
	case r.k.None:
		c.tell(ctx, "oom_kill_none", fields, head+": no process in the sandbox to kill (its memory is held by files in a tmpfs?)"+raise)
	default:
		fields["pid"], fields["comm"], fields["rss"] = strconv.Itoa(r.k.PID), r.k.Comm, strconv.FormatInt(r.k.RSS, 10)
		size := config.FormatSize(r.k.RSS) + " resident"
		if r.k.RSS < 0 {
			size = "busy allocating"
		}
		c.tell(ctx, "oom_kill", fields, fmt.Sprintf("%s: killed process %d (%s, %s) in the sandbox%s",
			head, r.k.PID, r.k.Comm, size, raise))
	}
}

// BeforeStop runs first at teardown (the component is last in the list):
// a sandbox the memory ceiling stopped is killed (resumed, it would grow
// again during the container's stop timeout), a paused one is resumed, so
// that the other components' last work and podman's stop find it running.
func (c *Component) BeforeStop(context.Context) { c.release() }

// Close implements sandbox.Component.
func (c *Component) Close(context.Context) error {
	c.release()
	c.mu.Lock()
	h := c.host
	c.host = nil
	c.mu.Unlock()
	if h != nil {
		h.close()
	}
	return nil
}

func (c *Component) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopping = true
	h := c.host
	if h == nil {
		return
	}
	switch {
	case c.memStop:
		if err := h.kill(); err != nil {
			c.o.Log.Error("limits: killing the stopped sandbox", "err", err)
		}
	case c.paused:
		if err := h.resume(); err != nil {
			c.o.Log.Error("limits: resuming the sandbox", "err", err)
		}
		c.paused = false
	}
}

// noticeEvery rate-limits the notices of one kind of event.
const noticeEvery = 10 * time.Second

// tell records an event: an audit entry and a log line always, one line on
// every attached terminal at most every noticeEvery per kind (the next
// says how many were not shown).
func (c *Component) tell(ctx context.Context, event string, fields map[string]string, line string) {
	c.record(ctx, event, fields)
	c.o.Log.Warn("limits", "event", event, "line", line)
	now := c.now()
	c.mu.Lock()
	if last, ok := c.lastSaid[event]; ok && now.Sub(last) < noticeEvery {
		c.quiet[event]++
		c.mu.Unlock()
		return
	}
	if n := c.quiet[event]; n > 0 {
		line += fmt.Sprintf(" (%d more like it not shown)", n)
	}
	c.lastSaid[event], c.quiet[event] = now, 0
	c.mu.Unlock()
	if c.o.Server != nil {
		c.o.Server.Broadcast(ctl.TypeNetNotice, ctl.NetNotice{Line: line})
	}
}

// record appends the audit entry of an event.
func (c *Component) record(ctx context.Context, event string, fields map[string]string) {
	if c.o.Audit == nil {
		return
	}
	f := map[string]string{"event": event}
	for k, v := range fields {
		f[k] = v
	}
	e := audit.Entry{Time: c.now(), Kind: audit.KindSandboxLimit, Profile: c.o.Profile.Name, Fields: f}
	if _, err := c.o.Audit(context.WithoutCancel(ctx), e); err != nil {
		c.o.Log.Error("limits: audit", "err", err)
	}
}

// Status is the usage against each limit (lazaret status).
func (c *Component) Status() *ctl.LimitsStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mem == nil {
		return nil
	}
	st := &ctl.LimitsStatus{Memory: &ctl.MemoryLimit{Limit: c.limit, Used: c.used, Ceiling: c.mem.ceiling,
		Mechanism: Mechanism, Kills: c.kills, Unenforced: c.unwatched}, Paused: c.paused}
	if c.memStop {
		st.Memory.Stopped = true
	}
	for _, d := range c.disks {
		st.Disk = append(st.Disk, ctl.DiskLimit{Path: d.path, Device: d.device, Reserve: d.reserve, Free: d.free, Paused: d.guard.paused})
	}
	st.CPUs, st.Pids = c.heldLimits()
	return st
}

// heldLimits are the cpus and pids limits as this host holds them (the
// same plan the sandbox's spec was made from).
func (c *Component) heldLimits() (cpus, pids *ctl.HeldLimit) {
	host, err := hostres.Probe()
	if err != nil {
		return nil, nil
	}
	plan, err := hostres.Decide(c.o.Profile.Name, c.o.Profile.Resources, host)
	if err != nil {
		return nil, nil
	}
	for _, l := range plan.Limits {
		h := &ctl.HeldLimit{Value: l.Value, Mechanism: l.Mechanism}
		switch l.Name {
		case "cpus":
			cpus = h
		case "pids":
			pids = h
		}
	}
	return cpus, pids
}

// attachHost finds the running sandbox's Sentry and its exec path.
func (c *Component) attachHost(ctx context.Context, container string) (sandboxHost, error) {
	info, err := c.o.Podman.InspectContainer(ctx, container)
	if err != nil {
		return nil, err
	}
	if !info.State.Running || info.State.Pid <= 0 {
		return nil, errors.New("the container is not running")
	}
	// Writes outside the persistent dirs and volumes land in the
	// container's upper layer, in podman's storage: its filesystem keeps
	// the reserve too (often the data root's, then it is one watch).
	c.watchAlso(info.GraphDriver.Data["UpperDir"])
	p, err := procwatch.Find(info.State.Pid)
	if err != nil {
		return nil, err
	}
	root := runscexec.DefaultRoot(os.Getenv("XDG_RUNTIME_DIR"))
	s, err := openSentry(p, recordedGofer(root, info.ID, p.PID))
	if err != nil {
		return nil, err
	}
	// The Sentry's session group below the user's (the shim could not:
	// runsc starts the Sentry in a new session, whose group starts at
	// nice 0).
	if err := sched.SetAutogroupNice(sched.AutogroupFile(p.PID), hostres.SandboxNice); err != nil {
		c.o.Log.Warn("limits: the sandbox's session group keeps its priority", "err", err)
	}
	runsc, _ := locate.Find(locate.Runsc)
	k := &execKiller{pm: c.o.Podman, runsc: runsc, flags: runscflags.Global(runscflags.DetectPlatform()),
		runscRoot: root, id: info.ID, name: container, log: c.o.Log}
	go k.start(ctx)
	return &realHost{sentry: s, k: k}, nil
}

type realHost struct {
	*sentry
	k *execKiller
}

func (h *realHost) oomKill(ctx context.Context) (killed, error) { return h.k.kill(ctx) }

func (h *realHost) close() {
	h.k.close()
	h.sentry.close()
}

// totalRAM is the host's memory in bytes.
func totalRAM() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}

// ErrNotWatched: the sandbox's processes are not reachable (the limits
// are unenforced, or the watch has not begun), so it cannot be paused.
var ErrNotWatched = errors.New("the sandbox's processes are not watched")

// watched says the watch has reached the processes or will not.
func (c *Component) watched() { c.watchingOnce.Do(func() { close(c.watching) }) }

// freezeWait bounds Freeze's wait for the watch to reach the processes.
const freezeWait = 30 * time.Second

// Freeze pauses the sandbox (its Sentry and gofer) until thaw is called,
// for a copy of its files that must see one instant (`lazaret fork`). A
// sandbox the disk reserve already paused stays paused after thaw. Right
// after a start it first waits for the watch to reach the processes
// (measured: a fork issued at once was copied unpaused 1 time in 5).
func (c *Component) Freeze(ctx context.Context) (thaw func(), err error) {
	select {
	case <-c.watching:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(freezeWait):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.host == nil || c.stopping {
		return nil, ErrNotWatched
	}
	if c.paused || c.memStop {
		return func() {}, nil
	}
	h := c.host
	if err := h.pause(); err != nil {
		return nil, err
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.paused && !c.memStop {
			if err := h.resume(); err != nil {
				c.o.Log.Error("limits: resuming the sandbox after a fork's copy", "err", err)
			}
		}
	}, nil
}
