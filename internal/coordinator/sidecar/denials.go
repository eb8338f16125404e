package sidecar

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// OnDenials sets f to run, once the sidecar has started and until Close,
// with the control client of netd (the coordinator reads the denial events
// through it and answers held names). Call it before Started.
func (c *Component) OnDenials(f func(ctx context.Context, cl *netdapi.Client)) { c.onDenials = f }

// startDenials runs the OnDenials hook once, in the background.
func (c *Component) startDenials() {
	if c.onDenials == nil {
		return
	}
	c.denialsOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-c.closing
			cancel()
		}()
		// The long poll needs more than the client's default timeout.
		go c.onDenials(ctx, &netdapi.Client{Socket: c.o.Anchor.NetdSocket(), Timeout: 40 * time.Second})
	})
}

// Rate limits of the notices (the agent decides how many denials happen).
const (
	// NoticeEvery is how often one destination gets a notice.
	NoticeEvery = time.Minute
	// noticeBurst notices at most are printed per noticeWindow; the rest
	// are summed up in one "N more" line.
	noticeBurst  = 5
	noticeWindow = 10 * time.Second
	// maxTracked bounds the destinations remembered (oldest forgotten).
	maxTracked = 1024
	// MaxShown bounds a name or address shown, after escaping.
	MaxShown = 100
)

// Limiter decides which denials become notice lines: one per destination
// per NoticeEvery, at most noticeBurst per noticeWindow, the others
// counted for a summary line. Safe for concurrent use.
type Limiter struct {
	mu          sync.Mutex
	last        map[string]time.Time
	windowStart time.Time
	inWindow    int
	suppressed  int
}

// NewLimiter returns an empty Limiter.
func NewLimiter() *Limiter { return &Limiter{last: map[string]time.Time{}} }

// Allow reports whether a denial of dest at now gets a notice line.
func (l *Limiter) Allow(dest string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[dest]; ok && now.Sub(t) < NoticeEvery {
		return false // repeats are in `lazaret net status`
	}
	if now.Sub(l.windowStart) >= noticeWindow {
		l.windowStart, l.inWindow = now, 0
	}
	if l.inWindow >= noticeBurst {
		l.suppressed++
		return false
	}
	l.inWindow++
	if len(l.last) >= maxTracked {
		l.forgetOldest()
	}
	l.last[dest] = now
	return true
}

// Lost counts denials that never reached the limiter (the event ring
// forgot them under a flood) as suppressed.
func (l *Limiter) Lost(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.suppressed += n
}

func (l *Limiter) forgetOldest() {
	var oldest string
	for k, v := range l.last {
		if oldest == "" || v.Before(l.last[oldest]) {
			oldest = k
		}
	}
	delete(l.last, oldest)
}

// Summary returns the "N more" line once the window of the suppressed
// denials has ended (ok false when there is nothing to say yet).
func (l *Limiter) Summary(now time.Time) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.suppressed == 0 || now.Sub(l.windowStart) < noticeWindow {
		return "", false
	}
	n := l.suppressed
	l.suppressed = 0
	return fmt.Sprintf("lazaret: %d more network denials (see `lazaret net status`)", n), true
}

// Shown renders a name or address that came from the sandbox for one line
// of the user's terminal: every control, bidi or invisible character
// escaped, at most MaxShown characters, quoted.
func Shown(s string) string {
	e := visible.Escape(s, visible.AngleForm)
	if utf8.RuneCountInString(e) > MaxShown {
		r := []rune(e)
		e = string(r[:MaxShown-1]) + "…"
	}
	return `"` + e + `"`
}

// AllowCommand is the command that allows target (an exact name or an
// address) for the running sandbox of profile, or "" when target is not
// something `lazaret net allow` takes as it is.
func AllowCommand(profile, target string) string {
	cidr, dom, err := netpolicy.ParseTarget(target)
	if err != nil || strings.HasPrefix(dom, "*.") || (dom != "" && dom != target) || (dom == "" && cidr.Addr().String() != target) {
		return ""
	}
	if profile == "" || profile == "default" {
		return "lazaret net allow " + target
	}
	return "lazaret net allow " + profile + " " + target
}

// answerNotice is the notice of an allowed name whose DNS answer named an
// address netd did not open (answer: "ADDR (why)"). netd reports one only
// when the policy in force does not open the address by a CIDR either,
// and says (NeverOpened) when no policy ever could: then no command is
// offered; else the address can be allowed like any other.
func answerNotice(profile string, ev netdapi.DenialEvent, answer string) string {
	line := "lazaret: network: the DNS answer for " + Shown(ev.Name) + " named " + Shown(answer)
	if ev.NeverOpened != "" {
		return line + " (" + visible.Escape(ev.NeverOpened, visible.AngleForm) + ": never opened)"
	}
	addr, _, _ := strings.Cut(answer, " ")
	line += ", an address a DNS answer does not open"
	if cmd := AllowCommand(profile, addr); cmd != "" {
		line += "; to allow it: " + cmd
	}
	return line
}

// ConfigLine is what to add to the profile's section of the config file
// to allow name in every run.
func ConfigLine(profile, name string) string {
	return fmt.Sprintf(`[profiles.%s] allow_domains = [..., %q]`, profile, name)
}

// Notice is the one line a denial event gets in the user's terminal, or
// "" for an event that is not worth one.
func Notice(profile string, ev netdapi.DenialEvent) string {
	if ev.Secret != "" {
		return "lazaret: secrets: the placeholder of secret " + Shown(ev.Secret) + " was sent to " + Shown(ev.Name) +
			", a host it is not for; it was not replaced (see `lazaret net status`)"
	}
	if ev.Name != "" {
		if _, answer, ok := strings.Cut(ev.Dest, " -> "); ok {
			return answerNotice(profile, ev, answer)
		}
		line := "lazaret: network: denied DNS lookup of " + Shown(ev.Name)
		if cmd := AllowCommand(profile, ev.Name); cmd != "" {
			return line + "; to allow it: " + cmd
		}
		return line + " (not a name the policy can list)"
	}
	proto, ap, ok := strings.Cut(ev.Dest, " ")
	addr, err := netip.ParseAddrPort(ap)
	if !ok || err != nil {
		return "lazaret: network: denied " + Shown(ev.Dest)
	}
	line := "lazaret: network: denied " + proto + " to " + Shown(addr.String())
	if ev.NeverOpened != "" {
		// The host's own address, metadata, link-local: no policy opens
		// it, and the agent may have dialled it to have the user try.
		return line + " (" + visible.Escape(ev.NeverOpened, visible.AngleForm) + ": never opened)"
	}
	if cmd := AllowCommand(profile, addr.Addr().String()); cmd != "" {
		line += "; to allow it: " + cmd
	}
	return line
}

// NameForms are the forms of a DNS name a user checks before allowing it:
// its Unicode form when it is an internationalised (punycode) name, and
// its registrable domain (what the owner of the zone controls).
func NameForms(name string) (unicodeForm, registrable string) {
	if u, err := idna.ToUnicode(name); err == nil && u != name {
		unicodeForm = u
	}
	if r, err := publicsuffix.EffectiveTLDPlusOne(name); err == nil {
		registrable = r
	}
	return unicodeForm, registrable
}
