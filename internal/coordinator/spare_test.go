package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
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

// spareComp records StartSpare and RemoveSpare; during, when set, runs
// inside StartSpare (a stop arriving meanwhile).
type spareComp struct {
	fakeComp
	handedOver       bool
	started, removed int
	ctxErr           error
	during           func()
}

func (s *spareComp) StartSpare(ctx context.Context) error {
	s.started++
	if s.during != nil {
		s.during()
	}
	s.ctxErr = ctx.Err()
	return s.ctxErr
}

func (s *spareComp) RemoveSpare(context.Context) error { s.removed++; return nil }

func (s *spareComp) HandOverToSpare() { s.handedOver = true }

// TestLeaveSpareAndStop: a stop request before the teardown leaves its
// spare means none is started; one during it cancels the start and
// removes what it made.
func TestLeaveSpareAndStop(t *testing.T) {
	newCoord := func(s *spareComp) *coordinator {
		return &coordinator{spareExpiry: time.Minute, containerID: "id", comps: []sandbox.Component{s}, prepared: 1,
			log: slog.New(slog.DiscardHandler), torndown: make(chan struct{})}
	}
	stop := func(c *coordinator) {
		c.mu.Lock()
		c.stopClosed = true // handleStop answers at once
		c.mu.Unlock()
		if _, err := c.handleStop(context.Background(), &ctlserver.Request{}); err != nil {
			t.Fatal(err)
		}
	}

	// teardown's order: the handover before the Closes, the spare after.
	teardown := func(c *coordinator, reason string, between func()) {
		c.handOverToSpare(reason)
		if between != nil {
			between()
		}
		c.leaveSpare(reason)
	}

	s := &spareComp{}
	teardown(newCoord(s), ReasonLastDetach, nil)
	if !s.handedOver || s.started != 1 || s.removed != 0 || s.ctxErr != nil {
		t.Errorf("no stop: %+v", s)
	}

	s = &spareComp{}
	teardown(newCoord(s), ReasonStopped, nil)
	if s.handedOver || s.started != 0 || s.removed != 0 {
		t.Errorf("a stopped sandbox: %+v", s)
	}

	// A stop before the teardown: Close removed everything, nothing to do.
	s = &spareComp{}
	c := newCoord(s)
	stop(c)
	teardown(c, ReasonLastDetach, nil)
	if s.handedOver || s.started != 0 || s.removed != 0 {
		t.Errorf("stop before: %+v", s)
	}

	// A stop between the handover and the spare: what Close left is
	// removed.
	s = &spareComp{}
	c = newCoord(s)
	teardown(c, ReasonLastDetach, func() { stop(c) })
	if !s.handedOver || s.started != 0 || s.removed != 1 {
		t.Errorf("stop after the handover: %+v", s)
	}

	s = &spareComp{}
	c = newCoord(s)
	s.during = func() { stop(c) }
	teardown(c, ReasonLastDetach, nil)
	if s.started != 1 || s.ctxErr == nil || s.removed != 1 {
		t.Errorf("stop during: %+v", s)
	}
}
