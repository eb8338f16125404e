package session

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzCanonicalList: two field sequences encode the same only when they
// are the same (the encoding is injective), and encoding is deterministic.
func FuzzCanonicalList(f *testing.F) {
	f.Add("a\x00b", "c", "ab\x00", "c")
	f.Add("", "", "", "")
	f.Add("make\x00lint", "x", "make", "lint\x00x")
	f.Fuzz(func(t *testing.T, a1, a2, b1, b2 string) {
		la, lb := split0(a1), split0(b1)
		ea := NewEncoder("t").List(la).String(a2).Sum()
		eb := NewEncoder("t").List(lb).String(b2).Sum()
		same := slices.Equal(la, lb) && (la == nil) == (lb == nil) && a2 == b2
		if bytes.Equal(ea, eb) != same {
			t.Fatalf("encoding not injective: %q/%q vs %q/%q", la, a2, lb, b2)
		}
		if !bytes.Equal(ea, NewEncoder("t").List(la).String(a2).Sum()) {
			t.Fatal("not deterministic")
		}
	})
}

func split0(s string) []string {
	if s == "" {
		return nil
	}
	if s == "\x00" {
		return []string{}
	}
	return strings.Split(s, "\x00")
}

// FuzzDecodeDelegation: arbitrary input never panics; whatever decodes
// re-encodes to the same canonical form and never verifies without the key.
func FuzzDecodeDelegation(f *testing.F) {
	a, _ := New()
	d, _ := a.Delegate("sb1", time.Hour, time.Unix(1e9, 0))
	js, _ := json.Marshal(&d.Delegation)
	f.Add(js)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"session_id":"x","extra":1}`))
	f.Add(append(slices.Clone(js), []byte(`{}`)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		dl, err := DecodeDelegation(data)
		if err != nil {
			return
		}
		again, _ := json.Marshal(dl)
		d2, err := DecodeDelegation(again)
		if err != nil || !bytes.Equal(d2.Canonical(), dl.Canonical()) {
			t.Fatalf("re-decode differs: %v", err)
		}
		if !bytes.Equal(data, js) && !bytes.Equal(dl.Canonical(), d.Delegation.Canonical()) {
			if dl.Verify(a.Public, dl.SessionID, dl.SandboxID, time.Unix(1e9, 0)) == nil {
				t.Fatal("a delegation the session never signed verifies")
			}
		}
	})
}
