package coord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/podman"
)

// ReasonContainerExited is the teardown reason when the agent container
// ended on its own (killed, removed with podman, runsc crashed).
const ReasonContainerExited = "the sandbox container exited"

// watchInterval is how often the coordinator checks that the container's
// process still lives: one stat of /proc, no podman process per check.
const watchInterval = time.Second

// watchDelay is how long after the start the watch begins.
const watchDelay = time.Second

// watchContainer tears the sandbox down when the agent container's
// process ends, so that its sessions are told at once and the next
// lazaret gets a fresh sandbox instead of "container state improper". It
// finds the process with one inspect, after the start (off the start
// path), and identifies it by pid and start time, so a reused pid is not
// mistaken for it.
func (c *coordinator) watchContainer(ctx context.Context) {
	// The inspect waits a moment: right after the start, the first
	// session's podman exec is running and should have the CPU.
	select {
	case <-ctx.Done():
		return
	case <-c.torndown:
		return
	case <-time.After(watchDelay):
	}
	info, err := c.pm.InspectContainer(ctx, c.containerID)
	switch {
	case errors.Is(err, podman.ErrNoSuchContainer) || (err == nil && !info.State.Running):
		c.containerExited()
		return
	case err != nil || info.State.Pid <= 0:
		c.log.Warn("cannot watch the container", "err", err)
		return
	}
	pid := info.State.Pid
	start, err := procStartTime(pid)
	if err != nil {
		c.containerExited()
		return
	}
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.torndown:
			return
		case <-t.C:
		}
		if st, err := procStartTime(pid); err == nil && st == start {
			continue
		}
		c.containerExited()
		return
	}
}

func (c *coordinator) containerExited() {
	c.log.Warn("the container is gone", "id", c.containerID)
	if c.shutdown(ReasonContainerExited, false) {
		c.poke()
	}
}

// procStartTime returns field 22 of /proc/<pid>/stat (start time in clock
// ticks since boot).
func procStartTime(pid int) (string, error) {
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
