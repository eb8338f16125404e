package keeper

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestKeyMatcher(t *testing.T) {
	keys := []byte{0x1c, 'd'}
	for _, c := range []struct {
		in     []string // reads, one after the other
		pass   string
		detach bool
	}{
		{[]string{"ls\r"}, "ls\r", false},
		{[]string{"a\x1cd"}, "a", true},
		{[]string{"\x1c", "d"}, "", true},                   // split across reads
		{[]string{"\x1cx"}, "\x1cx", false},                 // a prefix that does not complete goes on
		{[]string{"\x1c\x1cd"}, "\x1c", true},               // the sequence starts again
		{[]string{"\x1c", "q", "\x1cdrest"}, "\x1cq", true}, // after it: dropped
	} {
		m := &keyMatcher{keys: keys}
		var pass []byte
		detach := false
		for _, r := range c.in {
			p, d := m.feed([]byte(r))
			pass = append(pass, p...)
			if d {
				detach = true
				break
			}
		}
		if string(pass) != c.pass || detach != c.detach {
			t.Errorf("%q: pass %q detach %v, want %q %v", c.in, pass, detach, c.pass, c.detach)
		}
	}
}

// FuzzKeyMatcher: without the sequence in it, everything typed goes on,
// in order, once the matcher's held bytes are counted.
func FuzzKeyMatcher(f *testing.F) {
	f.Add([]byte("ls\x1c\x1cd"), []byte{0x1c, 'd'})
	f.Add([]byte("pq"), []byte{0x10, 0x11})
	f.Fuzz(func(t *testing.T, in, keys []byte) {
		if len(keys) == 0 || len(keys) > 8 {
			return
		}
		m := &keyMatcher{keys: keys}
		pass, detach := m.feed(in)
		if detach {
			return
		}
		held := keys[:m.n]
		if !bytes.Equal(append(append([]byte(nil), pass...), held...), in) && !bytes.Contains(in, keys[:1]) {
			t.Fatalf("in %q keys %q: pass %q held %q", in, keys, pass, held)
		}
	})
}

// TestDetachBeatenByEOF: the keeper closes the connection as soon as it
// reads FrameDetach; that EOF reaching readSession before relayKeys says
// the frame went out is still the user's detach, not a lost terminal.
func TestDetachBeatenByEOF(t *testing.T) {
	for range 20 {
		client, keeperEnd := net.Pipe()
		d := newDetachSignal()
		send := func(typ byte, p []byte) error {
			if typ == FrameDetach {
				// The keeper reads it and closes at once; the sender is
				// slow to come back (preempted, a loaded machine).
				keeperEnd.Close()
				time.Sleep(20 * time.Millisecond)
			}
			return nil
		}
		go relayKeys(strings.NewReader("ls\x1cd"), []byte{0x1c, 'd'}, send, d)
		res, err := readSession(client, io.Discard, d)
		if err != nil || !res.Detached || res.Lost {
			t.Fatalf("result %+v, err %v: want Detached", res, err)
		}
	}
}
