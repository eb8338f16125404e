package coordinator

import (
	"errors"
	"testing"
	"time"
)

func TestSpareExpiry(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
		bad  bool
	}{
		{"", DefaultSpareExpiry, false},
		{"off", 0, false},
		{"5m", 5 * time.Minute, false},
		{"soon", 0, true},
		{"0s", 0, true},
		{"-1m", 0, true},
	} {
		t.Setenv(spareEnv, c.env)
		got, err := spareExpiry()
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("%s=%q: %v, %v", spareEnv, c.env, got, err)
		}
	}
}

// TestLeavesSpare: only a sandbox that started and ended because nobody
// used it any more leaves a spare; a stop, a signal or a failure leaves
// nothing running.
func TestLeavesSpare(t *testing.T) {
	c := &coordinator{spareExpiry: time.Minute, containerID: "id"}
	for reason, want := range map[string]bool{
		ReasonLastDetach: true, ReasonIdle: true,
		ReasonStopped: false, ReasonTerminated: false, ReasonAborted: false,
		"watch: network sidecar died": false,
	} {
		if got := c.leavesSpare(reason); got != want {
			t.Errorf("%q: %v, want %v", reason, got, want)
		}
	}
	for _, c := range []*coordinator{
		{spareExpiry: 0, containerID: "id"},
		{spareExpiry: time.Minute},
		{spareExpiry: time.Minute, containerID: "id", startErr: errors.New("x")},
	} {
		if c.leavesSpare(ReasonLastDetach) {
			t.Errorf("%+v leaves a spare", c)
		}
	}
}
