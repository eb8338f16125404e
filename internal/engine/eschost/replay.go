package eschost

import (
	"sync"
	"time"
)

// ReplayWindow is how far a request's timestamp may be from the
// coordinator's clock. Ids and nonces are remembered for twice as long, so
// a request can never be accepted twice: outside the window it fails the
// time check, inside it the id or the nonce is remembered.
const ReplayWindow = 30 * time.Second

// replayCache remembers request ids and nonces.
type replayCache struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func newReplayCache() *replayCache { return &replayCache{seen: map[string]time.Time{}} }

// check refuses a request outside the window or whose id or nonce was seen,
// and otherwise records both.
func (c *replayCache) check(requestID, nonce string, ts, now time.Time) string {
	if d := now.Sub(ts); d > ReplayWindow || d < -ReplayWindow {
		return "timestamp outside the ±30 s window"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, t := range c.seen {
		if now.Sub(t) > 2*ReplayWindow {
			delete(c.seen, k)
		}
	}
	if _, ok := c.seen["r:"+requestID]; ok {
		return "request_id seen before"
	}
	if _, ok := c.seen["n:"+nonce]; ok {
		return "nonce seen before"
	}
	c.seen["r:"+requestID] = now
	c.seen["n:"+nonce] = now
	return ""
}
