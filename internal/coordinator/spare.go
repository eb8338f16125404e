package coordinator

import (
	"fmt"
	"os"
	"time"
)

// spareEnv controls the spare network sidecar a sandbox leaves for the
// domain's next start (docs/LIFECYCLE.md): "off" leaves none; a duration
// is how long an unclaimed spare waits before it exits.
const spareEnv = "LAZARET_SPARE_SIDECAR"

// DefaultSpareExpiry is how long a spare waits when spareEnv is unset.
const DefaultSpareExpiry = 30 * time.Minute

// spareExpiry reads spareEnv.
func spareExpiry() (time.Duration, error) {
	v := os.Getenv(spareEnv)
	switch v {
	case "":
		return DefaultSpareExpiry, nil
	case "off":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: give off or a duration such as 30m", spareEnv, v)
	}
	return d, nil
}

// leavesSpare reports whether a sandbox ending for reason leaves a spare:
// only one that started and ended because nobody uses it any more. A
// stop (`lazaret stop`, a signal, a failure) leaves nothing running.
func (c *coordinator) leavesSpare(reason string) bool {
	return c.spareExpiry > 0 && c.startErr == nil && c.containerID != "" &&
		(reason == ReasonLastDetach || reason == ReasonIdle)
}
