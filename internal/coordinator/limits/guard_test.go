package limits

import (
	"testing"
	"time"
)

const mib = 1 << 20

// TestMemGuard: below the limit nothing; at the limit one kill at a time;
// another only after the settle wait and when the usage grew; the hard
// ceiling stops even while a kill is under way. Control: without the kill
// finishing, the usage at the limit asks for nothing more.
func TestMemGuard(t *testing.T) {
	g := newMemGuard(512 * mib)
	if g.ceiling != 576*mib {
		t.Fatalf("ceiling %d", g.ceiling/mib)
	}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	if a := g.step(at(0), 100*mib); a != memNone {
		t.Fatal("kill below the limit")
	}
	if a := g.step(at(50), 512*mib); a != memKill {
		t.Fatal("no kill at the limit")
	}
	if a := g.step(at(60), 560*mib); a != memNone {
		t.Fatal("a second kill while one is under way")
	}
	g.killDone(at(100))
	if a := g.step(at(150), 530*mib); a != memNone {
		t.Fatal("a kill before the settle wait")
	}
	// Settled, still at the limit: what holds it is not freed by a kill.
	if a := g.step(at(1200), 530*mib); a != memNone {
		t.Fatal("a kill of the next process while nothing grows")
	}
	if a := g.step(at(1300), 531*mib); a != memNone {
		t.Fatal("a kill on growth below the slack")
	}
	if a := g.step(at(1400), 540*mib); a != memKill {
		t.Fatal("no kill when the usage grows again")
	}
	// The ceiling stops at once, kill or not, and only once.
	if a := g.step(at(1410), 576*mib); a != memStop {
		t.Fatal("no stop at the ceiling")
	}
	if a := g.step(at(1420), 900*mib); a != memNone {
		t.Fatal("a second stop")
	}
}

// TestMemGuardFreed: a kill that brought the usage below the limit lets
// the next crossing kill at once after the settle wait.
func TestMemGuardFreed(t *testing.T) {
	g := newMemGuard(1 << 30)
	t0 := time.Unix(1000, 0)
	if g.step(t0, 1<<30) != memKill {
		t.Fatal("no kill")
	}
	g.killDone(t0)
	g.step(t0.Add(1100*time.Millisecond), 10*mib)
	if g.step(t0.Add(1200*time.Millisecond), 1<<30) != memKill {
		t.Fatal("no kill at the next crossing")
	}
}

func TestMargin(t *testing.T) {
	for _, c := range []struct{ limit, want int64 }{
		{128 * mib, 64 * mib}, {512 * mib, 64 * mib}, {1024 * mib, 128 * mib}, {12 << 30, 256 * mib},
	} {
		if got := Margin(c.limit); got != c.want {
			t.Errorf("Margin(%d MiB) = %d MiB, want %d", c.limit/mib, got/mib, c.want/mib)
		}
	}
}

// TestDiskGuard: pause below the reserve, resume only above reserve +
// hysteresis; a zero reserve never pauses.
func TestDiskGuard(t *testing.T) {
	g := newDiskGuard(1 << 30)
	steps := []struct {
		free uint64
		want diskAction
	}{
		{2 << 30, diskNone}, {1<<30 - 1, diskPause}, {1<<30 - 5, diskNone},
		{1<<30 + 50*mib, diskNone}, {1<<30 + 103*mib, diskResume}, {1<<30 + 200*mib, diskNone},
	}
	for i, s := range steps {
		if got := g.step(s.free); got != s.want {
			t.Fatalf("step %d (free %d MiB): %v, want %v", i, s.free/mib, got, s.want)
		}
	}
	if z := newDiskGuard(0); z.step(0) != diskNone || z.near(0) {
		t.Fatal("a zero reserve acts")
	}
}
