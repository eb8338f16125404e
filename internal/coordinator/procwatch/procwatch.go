// Package procwatch tells whether a process still runs, identified by its
// pid and start time so a reused pid is not mistaken for it. It reads
// /proc only: watching costs one small read a tick, no podman process.
package procwatch

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Process is one process as first seen.
type Process struct {
	PID   int
	start string // field 22 of /proc/<pid>/stat
}

// Find identifies the running process pid.
func Find(pid int) (Process, error) {
	if pid <= 0 {
		return Process{}, fmt.Errorf("no process (pid %d)", pid)
	}
	st, err := startTime(pid)
	if err != nil {
		return Process{}, err
	}
	return Process{PID: pid, start: st}, nil
}

// Alive reports whether p still runs (not a zombie, pid not reused).
func (p Process) Alive() bool {
	st, err := startTime(p.PID)
	return err == nil && st == p.start
}

// Wait returns nil when p has ended, checking every interval, or ctx's
// error when ctx ends first.
func (p Process) Wait(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for p.Alive() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// startTime returns field 22 of /proc/<pid>/stat (start time in clock
// ticks since boot); a zombie counts as ended.
func startTime(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(s[i+1:])
	// After "pid (comm)": state is field 3, starttime field 22.
	if len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return "", fmt.Errorf("process %d has exited", pid)
	}
	return fields[19], nil
}
