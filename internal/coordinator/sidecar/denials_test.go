package sidecar

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

func TestLimiterOncePerDestinationAndBurst(t *testing.T) {
	l := NewLimiter()
	t0 := time.Unix(1_000_000, 0)
	if !l.Allow("dns a.example", t0) {
		t.Fatal("first denial not shown")
	}
	if l.Allow("dns a.example", t0.Add(30*time.Second)) {
		t.Fatal("the same destination shown twice within a minute")
	}
	if !l.Allow("dns a.example", t0.Add(NoticeEvery)) {
		t.Fatal("the same destination not shown again after a minute")
	}
	// A burst of distinct names: noticeBurst lines, the rest summed up.
	t1 := t0.Add(5 * time.Minute)
	shown := 0
	for i := range 50 {
		if l.Allow(fmt.Sprintf("dns n%d.example", i), t1) {
			shown++
		}
	}
	if shown != noticeBurst {
		t.Fatalf("%d lines for a burst, want %d", shown, noticeBurst)
	}
	if _, ok := l.Summary(t1.Add(time.Second)); ok {
		t.Fatal("summary before the window ended")
	}
	s, ok := l.Summary(t1.Add(noticeWindow))
	if !ok || !strings.Contains(s, "45 more network denials") || !strings.HasPrefix(s, "lazaret: ") {
		t.Fatalf("summary: %q %v", s, ok)
	}
	if _, ok := l.Summary(t1.Add(2 * noticeWindow)); ok {
		t.Fatal("summary repeated")
	}
	// Memory stays bounded whatever the agent asks.
	for i := range 3 * maxTracked {
		l.Allow(fmt.Sprintf("dns m%d.example", i), t1.Add(time.Duration(i)*noticeWindow))
	}
	if len(l.last) > maxTracked {
		t.Fatalf("%d destinations tracked", len(l.last))
	}
}

// TestNoticeEscapesHostileName: a DNS name is the agent's choice; the
// notice is one line whatever it holds (escape sequences, newlines, bidi
// overrides, invalid UTF-8, any length), and only a listable name gets an
// allow command. Positive control: the raw name does hold the bytes that
// would act on the terminal.
func TestNoticeEscapesHostileName(t *testing.T) {
	hostile := "evil\x1b]0;pwned\x07\r\nlazaret: allowed\u202egro.\xff" + strings.Repeat("a", 500)
	if !strings.ContainsAny(hostile, "\x1b\r\n\x07") {
		t.Fatal("control: the name holds no control bytes")
	}
	line := Notice("default", netdapi.DenialEvent{Dest: "dns " + hostile, Name: hostile})
	if strings.ContainsAny(line, "\x1b\r\n\x07\u202e") || !utf8.ValidString(line) {
		t.Fatalf("raw control bytes in the notice: %q", line)
	}
	if !strings.HasPrefix(line, "lazaret: ") || strings.Contains(line, "lazaret net allow") {
		t.Fatalf("notice: %q", line)
	}
	if n := utf8.RuneCountInString(line); n > MaxShown+100 {
		t.Fatalf("notice of %d characters", n)
	}
	ok := Notice("claude", netdapi.DenialEvent{Dest: "dns registry.example.org", Name: "registry.example.org"})
	want := `lazaret: network: denied DNS lookup of "registry.example.org"; to allow it: lazaret net allow claude registry.example.org`
	if ok != want {
		t.Fatalf("notice:\n got %s\nwant %s", ok, want)
	}
	pkt := Notice("default", netdapi.DenialEvent{Dest: "tcp 192.0.3.20:443"})
	if pkt != `lazaret: network: denied tcp to "192.0.3.20:443"; to allow it: lazaret net allow 192.0.3.20` {
		t.Fatalf("packet notice: %s", pkt)
	}
	// An address no policy opens (netd gives the reason): no command to
	// allow it, which the agent could have provoked the notice to get run.
	never := Notice("default", netdapi.DenialEvent{Dest: "tcp 192.0.2.2:2024", NeverOpened: "an address of this host"})
	if never != `lazaret: network: denied tcp to "192.0.2.2:2024" (an address of this host: never opened)` {
		t.Fatalf("never-opened notice: %s", never)
	}
	if c := AllowCommand("default", "*.example.com"); c != "" {
		t.Fatalf("a pattern got an allow command: %s", c)
	}
}

func TestNameForms(t *testing.T) {
	u, reg := NameForms("xn--pple-43d.com")
	if u != "аpple.com" || reg != "xn--pple-43d.com" {
		t.Fatalf("punycode: %q %q", u, reg)
	}
	u, reg = NameForms("netdapi.github.com.evil.co.uk")
	if u != "" || reg != "evil.co.uk" {
		t.Fatalf("registrable: %q %q", u, reg)
	}
}

// FuzzNotice: whatever name or destination the sandbox produces, the
// notice is one valid-UTF-8 line starting with "lazaret: ", with no
// control, bidi or invisible character and a bounded length.
func FuzzNotice(f *testing.F) {
	f.Add("blocked.test", "dns blocked.test")
	f.Add("ev\x1b[31mil.test", "dns ev\x1b[31mil.test")
	f.Add("", "tcp 192.0.3.20:443")
	f.Add("", "udp [2001:db8::1]:53\n")
	f.Add("a.test", "dns a.test -> 10.0.2.2 (slirp)\u202e")
	f.Fuzz(func(t *testing.T, name, dest string) {
		line := Notice("default", netdapi.DenialEvent{Name: name, Dest: dest})
		if !strings.HasPrefix(line, "lazaret: ") || !utf8.ValidString(line) {
			t.Fatalf("%q", line)
		}
		for _, r := range line {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || visible.Hidden(r) {
				t.Fatalf("character %U in %q", r, line)
			}
		}
		if n := utf8.RuneCountInString(line); n > 3*MaxShown+200 {
			t.Fatalf("%d characters", n)
		}
	})
}

// TestAnswerNoticeTrue: a refused answer address is "never opened" only
// when no policy can open it (netd says so in NeverOpened); any other gets
// the allow command a user can run (the notice kept saying "never opened"
// of an address allow_egress opens).
func TestAnswerNoticeTrue(t *testing.T) {
	got := Notice("claude", netdapi.DenialEvent{Name: "intranet.example", Dest: "dns intranet.example -> 10.1.2.3 (private-use)"})
	want := `lazaret: network: the DNS answer for "intranet.example" named "10.1.2.3 (private-use)", an address a DNS answer does not open; to allow it: lazaret net allow claude 10.1.2.3`
	if got != want {
		t.Fatalf("notice:\n got %s\nwant %s", got, want)
	}
	got = Notice("default", netdapi.DenialEvent{Name: "m.example", Dest: "dns m.example -> 169.254.169.254 (link-local)", NeverOpened: "link-local or cloud metadata"})
	if got != `lazaret: network: the DNS answer for "m.example" named "169.254.169.254 (link-local)" (link-local or cloud metadata: never opened)` {
		t.Fatalf("never-opened answer: %s", got)
	}
}
