package config

import (
	"bytes"
	"testing"
)

func TestParseDetachKeys(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []byte
	}{
		{DefaultDetachKeys, []byte{0x1c, 'd'}},
		{"ctrl-p,ctrl-q", []byte{0x10, 0x11}},
		{"CTRL-A,x", []byte{0x01, 'x'}},
		{"ctrl-@", []byte{0}},
		{"ctrl-_,ctrl-]", []byte{0x1f, 0x1d}},
		{",", nil}, // ',' alone is two empty keys
	} {
		got, err := ParseDetachKeys(c.in)
		if c.want == nil {
			if err == nil {
				t.Errorf("%q: no error, got %q", c.in, got)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%q: got %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "ctrl-", "ctrl-1", "ctrl-ab", "é", " ", "ab", "a,,b", "a,b,c,d,e,f,g,h,i", "\x1c"} {
		if got, err := ParseDetachKeys(bad); err == nil {
			t.Errorf("%q: accepted as %q", bad, got)
		}
	}
}

func FuzzParseDetachKeys(f *testing.F) {
	for _, s := range []string{DefaultDetachKeys, "ctrl-p,ctrl-q", "x", "ctrl-", ",,", "ctrl-\\,ctrl-\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseDetachKeys(s)
		if err != nil {
			return
		}
		if len(b) == 0 || len(b) > maxDetachKeys {
			t.Fatalf("%q: %d keys", s, len(b))
		}
		for _, c := range b {
			if c >= 0x7f || c == ' ' {
				t.Fatalf("%q: key byte %#x", s, c)
			}
		}
	})
}

// TestSessionDetachKeysConfig: a bad detach_keys is a one-line error
// naming session.detach_keys; a good one is kept as written.
func TestSessionDetachKeysConfig(t *testing.T) {
	wantErr(t, "[session]\ndetach_keys = \"ctrl-1\"\n", "session.detach_keys", "invalid detach_keys", false)
	c := mustParse(t, "[session]\ndetach_keys = \"ctrl-p,ctrl-q\"\non_close = \"end\"\n")
	if c.Session.DetachKeys != "ctrl-p,ctrl-q" || c.Session.OnClose != OnCloseEnd {
		t.Fatalf("session = %+v", c.Session)
	}
	if d := mustParse(t, ""); d.Session.DetachKeys != DefaultDetachKeys || d.Session.OnClose != OnCloseDetach {
		t.Fatalf("defaults = %+v", d.Session)
	}
}
