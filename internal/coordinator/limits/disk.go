package limits

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// fsWatch is one filesystem the sandbox writes.
type fsWatch struct {
	path    string // the first of the sandbox's paths on it
	dev     uint64
	device  string // its mount source, for the notice ("/dev/vda1")
	reserve uint64
	guard   *diskGuard
	free    uint64 // the last sample (under Component.mu)
}

// statfs returns the free space an unprivileged user may use and the
// size of the filesystem holding path.
func statfs(path string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// checkDisks returns one watch per filesystem of paths (deduplicated by
// device), or the start error of a reserve that cannot be kept.
func (c *Component) checkDisks(paths []string) ([]*fsWatch, error) {
	r := c.o.Profile.Resources.DiskReserve
	var out []*fsWatch
	seen := map[uint64]bool{}
	for _, p := range paths {
		if p == "" {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return nil, fmt.Errorf("disk_reserve: %w", err)
		}
		if seen[st.Dev] {
			continue
		}
		seen[st.Dev] = true
		free, total, err := c.statfs(p)
		if err != nil {
			return nil, fmt.Errorf("disk_reserve: %w", err)
		}
		w := &fsWatch{path: p, dev: st.Dev, device: mountSource(st.Dev), reserve: r.Of(total), free: free}
		w.guard = newDiskGuard(w.reserve)
		if err := r.Check(total); err != nil {
			return nil, fmt.Errorf("%w on %s (%s); lower disk_reserve in profile %s (docs/CONFIG.md)", err, w.device, p, c.o.Profile.Name)
		}
		if w.reserve > 0 && free < w.reserve {
			return nil, fmt.Errorf("disk_reserve %s: %s (%s) has only %s free; free some space or lower disk_reserve in profile %s (docs/CONFIG.md)",
				config.FormatSize(int64(w.reserve)), w.device, p, config.FormatSize(int64(free)), c.o.Profile.Name)
		}
		out = append(out, w)
	}
	return out, nil
}

// watchAlso adds the filesystem of path to the watched ones, unless it is
// one of them already; a path that cannot be read is logged and skipped
// (the container's own layer: the start has passed its checks).
func (c *Component) watchAlso(path string) {
	if path == "" {
		return
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		c.o.Log.Warn("limits: the container's layer is not watched", "path", path, "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.disks {
		if d.dev == st.Dev {
			return
		}
	}
	free, total, err := c.statfs(path)
	if err != nil {
		c.o.Log.Warn("limits: the container's layer is not watched", "path", path, "err", err)
		return
	}
	w := &fsWatch{path: path, dev: st.Dev, device: mountSource(st.Dev), reserve: c.o.Profile.Resources.DiskReserve.Of(total), free: free}
	w.guard = newDiskGuard(w.reserve)
	c.disks = append(c.disks, w)
}

// checkDisk samples the filesystems (every one when due, else only those
// near their reserve), pauses or resumes the sandbox, and reports whether
// any is near its reserve.
func (c *Component) checkDisk(ctx context.Context, h sandboxHost, due bool) bool {
	near := false
	for _, d := range c.disks {
		c.mu.Lock()
		wasNear := d.guard.near(d.free)
		c.mu.Unlock()
		if !due && !wasNear {
			continue
		}
		free, _, err := c.statfs(d.path)
		if err != nil {
			continue
		}
		c.mu.Lock()
		d.free = free
		act := d.guard.step(free)
		near = near || d.guard.near(free)
		c.mu.Unlock()
		switch act {
		case diskPause:
			c.pauseFor(ctx, h, d, free)
		case diskResume:
			c.resumeFor(ctx, h, d, free)
		}
	}
	return near
}

func (c *Component) pauseFor(ctx context.Context, h sandboxHost, d *fsWatch, free uint64) {
	c.mu.Lock()
	var err error
	switch {
	case c.stopping:
		// Teardown has begun and resumed the sandbox for its stop: a
		// sandbox still filling the disk is killed instead.
		err = h.kill()
	case !c.paused:
		err = h.pause()
		c.paused = err == nil
	}
	c.mu.Unlock()
	if err != nil {
		c.o.Log.Error("limits: pausing the sandbox", "err", err)
	}
	fields := c.diskFields(d, free)
	c.tell(ctx, "paused", fields, fmt.Sprintf("lazaret: free space on %s (%s free, disk_reserve %s): the sandbox is paused and resumes by itself when %s is free; or `lazaret stop`; disk_reserve in docs/CONFIG.md",
		d.device, config.FormatSize(int64(free)), config.FormatSize(int64(d.reserve)), config.FormatSize(int64(d.guard.resumeAt()))))
}

func (c *Component) resumeFor(ctx context.Context, h sandboxHost, d *fsWatch, free uint64) {
	c.mu.Lock()
	still := false
	for _, o := range c.disks {
		still = still || o.guard.paused
	}
	var err error
	if !still && c.paused && !c.memStop {
		err = h.resume()
		c.paused = err != nil
	}
	c.mu.Unlock()
	if err != nil {
		c.o.Log.Error("limits: resuming the sandbox", "err", err)
	}
	if still {
		return
	}
	c.tell(ctx, "resumed", c.diskFields(d, free), fmt.Sprintf("lazaret: free space on %s is back (%s free, disk_reserve %s): the sandbox runs again",
		d.device, config.FormatSize(int64(free)), config.FormatSize(int64(d.reserve))))
}

func (c *Component) diskFields(d *fsWatch, free uint64) map[string]string {
	return map[string]string{"limit": "disk_reserve", "device": d.device, "path": d.path,
		"reserve": strconv.FormatUint(d.reserve, 10), "free": strconv.FormatUint(free, 10)}
}

// mountSource names the filesystem of device dev from this process's
// mountinfo ("/dev/vda1"); "device MAJ:MIN" when it is not there.
func mountSource(dev uint64) string {
	want := fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))
	f, err := os.Open("/proc/self/mountinfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 || fields[2] != want {
				continue
			}
			for i, x := range fields {
				if x == "-" && i+2 < len(fields) {
					return fields[i+2]
				}
			}
		}
	}
	return "device " + want
}
