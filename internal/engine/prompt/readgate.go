package prompt

import (
	"sync"
	"time"
)

// MinReadable is how long a prompt's last frame must have been on the
// screen before any key may answer it (the readability gate).
//
// Why a second: the keys to defeat are the ones the human typed for the
// shell (the agent owns that terminal and times its request to land
// between two of them), not a decision. A key only answers the prompt if
// it was pressed after the human saw the prompt and chose a key: a choice
// reaction among four keys takes 0.4-0.6 s (Hick's law; the classic
// figures), and a typist told to stop still lets one or two keystrokes of
// the motor buffer go, 0.2-0.3 s of stop-signal latency (Logan, 1982).
// Type-ahead at 50-200 ms a key, as in issue 33, thus produces 3 to 20
// keys inside the gate and none the human chose. One second covers the
// slow end of both with a margin and costs a human who reads the prompt
// nothing: reading even the shortest request (title, executable, argv:
// ten words or more) takes longer than a second. The render latency the
// gate adds on top (bubbletea's next frame, at most 1/60 s later) is
// counted from the write itself, not from the request. docs/SECURITY.md
// ("Typed-ahead answers") has the measurements.
const MinReadable = time.Second

// IgnoredNotice is the line every prompt shows once it dropped a key.
const IgnoredNotice = "keys typed before the prompt was readable were ignored"

// ReadGate is the one rule for every prompt lazaret draws: a key counts
// only if it arrived once the prompt's content had been on the screen for
// the gate's delay; every key before that is dropped and counted. The
// gate closes again whenever the prompt shows something new to read (a
// new request, an edited command, a resize, lines scrolled into view):
// Change closes it, Drawn (the time the frame showing it was completely
// written) starts the delay over. Safe for concurrent use: the input
// reader, the output writer and the prompt's own loop share one.
type ReadGate struct {
	mu    sync.Mutex
	delay time.Duration
	now   func() time.Time
	// epoch counts content changes; drawn is the epoch whose frame was
	// written last, at drawnAt. The gate is open only for drawn == epoch.
	epoch, drawn uint64
	drawnAt      time.Time
	// handed is the epoch whose view the renderer holds (bubbletea renders
	// asynchronously: the first write that starts after the hand-over is
	// the frame that shows it).
	handed  uint64
	dropped int
	// off opens the gate for good: tests only (the prompt as it was
	// before the gate, for tests of other rules and positive controls).
	off bool
}

// NewReadGate returns a closed gate with the given delay (negative means
// MinReadable) and clock (nil means time.Now).
func NewReadGate(delay time.Duration, now func() time.Time) *ReadGate {
	if delay < 0 {
		delay = MinReadable
	}
	if now == nil {
		now = time.Now
	}
	return &ReadGate{delay: delay, now: now, epoch: 1}
}

// Now is the gate's clock.
func (g *ReadGate) Now() time.Time { return g.now() }

// Change records that the prompt's content changed: the gate is closed
// until the frame showing the change has been drawn (Drawn, or a write
// after HandOver) and read. It returns the new epoch.
func (g *ReadGate) Change() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.epoch++
	return g.epoch
}

// Drawn records that the current content is completely on the screen now
// (for prompts that write their frame themselves, synchronously).
func (g *ReadGate) Drawn() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drawn, g.drawnAt, g.handed = g.epoch, g.now(), g.epoch
}

// HandOver records that the renderer now holds the view of epoch e: the
// first write to the terminal that starts after this call draws it.
func (g *ReadGate) HandOver(e uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e == g.epoch {
		g.handed = e
	}
}

// beginWrite is called before a write to the terminal; it returns the
// epoch that write shows completely, or 0.
func (g *ReadGate) beginWrite() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.handed == g.epoch && g.drawn != g.epoch {
		return g.epoch
	}
	return 0
}

// endWrite is called once that write returned: the frame of e is drawn
// now, if no change came meanwhile.
func (g *ReadGate) endWrite(e uint64) {
	if e == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if e == g.epoch && g.drawn != e {
		g.drawn, g.drawnAt = e, g.now()
	}
}

// DrawnBy marks epoch e drawn now unless a write did already (the frame
// it would write equalled the screen, so the renderer wrote nothing);
// it reports whether e is still the current epoch.
func (g *ReadGate) DrawnBy(e uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e != g.epoch {
		return false
	}
	if g.drawn != e {
		g.drawn, g.drawnAt, g.handed = e, g.now(), e
	}
	return true
}

// OpenAt reports whether a key that arrived at t counts: the current
// content was drawn and t is at least the delay after it. A key at the
// deadline itself counts.
func (g *ReadGate) OpenAt(t time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.openAt(t)
}

func (g *ReadGate) openAt(t time.Time) bool {
	return g.off || g.drawn == g.epoch && !t.Before(g.drawnAt.Add(g.delay))
}

// Admit decides for a key arriving now: true if it counts, else it is
// dropped and counted.
func (g *ReadGate) Admit() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.openAt(g.now()) {
		return true
	}
	g.dropped++
	return false
}

// Deadline is when the gate opens for the current content; false while
// that content is not drawn yet.
func (g *ReadGate) Deadline() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.drawn != g.epoch {
		return time.Time{}, false
	}
	return g.drawnAt.Add(g.delay), true
}

// Epoch is the current content's epoch.
func (g *ReadGate) Epoch() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.epoch
}

// drop counts n keys dropped by the input reader.
func (g *ReadGate) drop(n int) {
	g.mu.Lock()
	g.dropped += n
	g.mu.Unlock()
}

// Dropped is the number of keys dropped since the last ResetDropped.
func (g *ReadGate) Dropped() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dropped
}

// ResetDropped forgets the dropped keys (a new request is shown).
func (g *ReadGate) ResetDropped() {
	g.mu.Lock()
	g.dropped = 0
	g.mu.Unlock()
}
