package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/visible"
)

func sample(kind Kind) Entry {
	e := Entry{Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Kind: kind, Profile: "claude", Session: "s1"}
	req := &Request{RequestID: "r1", Argv: []string{"make", "lint"}}
	switch kind {
	case KindEscalationRequest:
		e.Request = req
	case KindEscalationRejected:
		e.Rejection = &Rejection{Stage: "signature", Reason: "bad signature"}
	case KindEscalationDecision:
		e.Request, e.Decision = req, &Decision{Outcome: OutcomeEdited, Argv: []string{"make", "lint", "-k"}}
	case KindEscalationResult:
		e.Request, e.Result = req, &Result{ExitCode: 2, DurationMS: 1500, StdoutBytes: 3, StdoutSHA256: Sum([]byte("hi\n"))}
	default:
		e.Fields = map[string]string{"container": "lazaret-claude-abc"}
	}
	return e
}

func TestValidate(t *testing.T) {
	for _, k := range Kinds {
		e := sample(k)
		if err := e.Validate(); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	bad := map[string]Entry{
		"unknown kind":           {Kind: "nope"},
		"request without id":     {Kind: KindEscalationRequest, Request: &Request{}},
		"rejected without stage": {Kind: KindEscalationRejected, Rejection: &Rejection{}},
		"decision missing":       {Kind: KindEscalationDecision, Request: &Request{RequestID: "r"}},
		"edited without argv":    {Kind: KindEscalationDecision, Request: &Request{RequestID: "r"}, Decision: &Decision{Outcome: OutcomeEdited}},
		"unknown outcome":        {Kind: KindEscalationDecision, Request: &Request{RequestID: "r"}, Decision: &Decision{Outcome: "maybe"}},
		"result missing":         {Kind: KindEscalationResult, Request: &Request{RequestID: "r"}},
	}
	for name, e := range bad {
		if err := e.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSealDecodeRoundTrip(t *testing.T) {
	e := sample(KindEscalationResult)
	e.Time = time.Date(2026, 12, 2, 11, 0, 0, 5, time.FixedZone("X", 3600))
	body, err := Seal(&e, 7, GenesisPrev)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), `"hash"`) {
		t.Fatalf("canonical encoding contains the hash: %s", body)
	}
	got, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != e.Hash || got.Seq != 7 || !got.Time.Equal(e.Time) || got.Result.ExitCode != 2 {
		t.Fatalf("round trip: %+v vs %+v", got, e)
	}
	again, _ := got.Canonical()
	if string(again) != string(body) {
		t.Fatalf("canonical encoding not stable:\n%s\n%s", body, again)
	}
}

// chain builds n sealed records keyed 1..n.
func chain(t *testing.T, n int) [][]byte {
	t.Helper()
	prev := GenesisPrev
	var recs [][]byte
	for i := 1; i <= n; i++ {
		e := sample(Kinds[i%len(Kinds)])
		body, err := Seal(&e, uint64(i), prev)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, EncodeRecord(e.Hash, body))
		prev = e.Hash
	}
	return recs
}

func verify(recs [][]byte, keys []uint64, head *Head) Report {
	v := NewVerifier()
	for i, r := range recs {
		if !v.Add(keys[i], r) {
			break
		}
	}
	return v.Finish(head)
}

func seqKeys(n int) []uint64 {
	k := make([]uint64, n)
	for i := range k {
		k[i] = uint64(i + 1)
	}
	return k
}

func headOf(t *testing.T, recs [][]byte) *Head {
	last := recs[len(recs)-1]
	h, body, err := DecodeRecord(last)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := Decode(body)
	return &Head{Seq: e.Seq, Hash: h}
}

func TestVerifier(t *testing.T) {
	recs := chain(t, 6)
	head := headOf(t, recs)
	if r := verify(recs, seqKeys(6), head); !r.OK() || r.Entries != 6 {
		t.Fatalf("clean chain: %+v", r.Problem)
	}
	if r := verify(nil, nil, nil); !r.OK() {
		t.Fatalf("empty chain: %+v", r.Problem)
	}

	edit := func(rec []byte, rehash bool) []byte {
		_, body, _ := DecodeRecord(rec)
		e, _ := Decode(body)
		e.Profile = "evil"
		nb, _ := e.Canonical()
		h, _, _ := DecodeRecord(rec)
		if rehash {
			h = Sum(nb)
		}
		return EncodeRecord(h, nb)
	}
	cases := []struct {
		name    string
		recs    [][]byte
		keys    []uint64
		head    *Head
		seq     uint64
		because string
	}{
		{"edited", replace(recs, 2, edit(recs[2], false)), seqKeys(6), head, 3, "edited"},
		{"edited and rehashed", replace(recs, 2, edit(recs[2], true)), seqKeys(6), head, 4, "prev does not match"},
		{"deleted", append(clone(recs[:3]), recs[4:]...), []uint64{1, 2, 3, 5, 6}, head, 4, "missing"},
		{"reordered", swap(recs, 1, 2), seqKeys(6), head, 2, "reordered"},
		{"last deleted", recs[:5], seqKeys(5), head, 6, "deleted from the end"},
		{"appended outside", recs, seqKeys(6), &Head{Seq: 5, Hash: "x"}, 6, "added outside"},
		{"head missing", recs, seqKeys(6), nil, 6, "head record is missing"},
	}
	for _, c := range cases {
		r := verify(c.recs, c.keys, c.head)
		if r.OK() {
			t.Errorf("%s: verified", c.name)
			continue
		}
		if r.Problem.Seq != c.seq || !strings.Contains(r.Problem.Reason, c.because) {
			t.Errorf("%s: got %v, want entry %d (%s)", c.name, r.Problem, c.seq, c.because)
		}
	}
}

func clone(r [][]byte) [][]byte { return append([][]byte(nil), r...) }
func replace(r [][]byte, i int, v []byte) [][]byte {
	c := clone(r)
	c[i] = v
	return c
}
func swap(r [][]byte, i, j int) [][]byte {
	c := clone(r)
	c[i], c[j] = c[j], c[i]
	return c
}

func TestEscape(t *testing.T) {
	cases := map[string]string{
		"plain text":           "plain text",
		"\x1b[31mred":          `\x1b[31mred`,
		"a\nb\tc\r":            `a\nb\tc\r`,
		"back\\slash":          `back\\slash`,
		"rm -rf \u202e/ txt":   `rm -rf \u202e/ txt`,
		"zero\u200bwidth":      `zero\u200bwidth`,
		"bom\ufeff":            `bom\ufeff`,
		"isolate\u2066x\u2069": `isolate\u2066x\u2069`,
		"c1\u009bcsi":          `c1\u009bcsi`,
		"nbsp\u00a0":           `nbsp\u00a0`,
		"tag\U000E0041":        `tag\U000e0041`,
		"bad\xffutf8":          `bad\xffutf8`,
		"héllo wörld 日本":       "héllo wörld 日本",
	}
	for in, want := range cases {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := EscapeArgv([]string{"echo", "a b", "", "\x1b"}); got != `echo 'a b' '' \x1b` {
		t.Errorf("EscapeArgv = %q", got)
	}
}

func TestLineHasNoControlCharacters(t *testing.T) {
	e := sample(KindEscalationDecision)
	e.Request.Justification = "please\x1b]0;owned\x07 \u202eexe.txt"
	e.Decision.Argv = []string{"ls", "\x1b[2J"}
	e.Seq = 3
	line := Line(e)
	if !allVisible(line) {
		t.Fatalf("line has hidden characters: %q", line)
	}
	if !strings.Contains(line, `\x1b]0;owned\x07`) || !strings.Contains(line, `\u202e`) {
		t.Fatalf("line does not show the escapes: %s", line)
	}
}

func allVisible(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || visible.Hidden(r) {
			return false
		}
	}
	return true
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "a\x1bb", "\u202e", "\xff\xfe", "日本\u200d", `\x1b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if !allVisible(out) {
			t.Fatalf("Escape(%q) = %q keeps a hidden character", s, out)
		}
		if Escape(out) != strings.ReplaceAll(out, `\`, `\\`) {
			t.Fatalf("escaped output %q contains characters that need escaping besides backslashes", out)
		}
	})
}

func FuzzVerifier(f *testing.F) {
	for _, s := range []string{"", "0000", strings.Repeat("a", 64) + "\n{}", strings.Repeat("0", 64) + "\n{\"seq\":1}"} {
		f.Add(uint64(1), []byte(s))
	}
	f.Fuzz(func(t *testing.T, key uint64, rec []byte) {
		v := NewVerifier()
		v.Add(key, rec) // must not panic
		v.Finish(&Head{Seq: key})
		_, _ = parseRecord(rec)
	})
}

func TestEscapeJSON(t *testing.T) {
	e := sample(KindSessionStart)
	e.Fields = map[string]string{"x": "a\u202eb\U000E0041c\x1b"}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	out := EscapeJSON(b)
	if !allVisible(string(out)) {
		t.Fatalf("hidden characters left: %q", out)
	}
	var back Entry
	if err := json.Unmarshal(out, &back); err != nil || back.Fields["x"] != e.Fields["x"] {
		t.Fatalf("not the same JSON value: %v %q", err, back.Fields["x"])
	}
}

func TestVerifyEntries(t *testing.T) {
	recs := chain(t, 5)
	var entries []Entry
	for _, r := range recs {
		e, err := parseRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		// Through JSON, as an export is read back.
		b, _ := json.Marshal(e)
		var back Entry
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, back)
	}
	head := headOf(t, recs)
	if r := verifyEntries(entries, head); !r.OK() || r.Entries != 5 {
		t.Fatalf("export: %+v", r.Problem)
	}
	entries[2].Fields = map[string]string{"container": "other"}
	if r := verifyEntries(entries, head); r.OK() || r.Problem.Seq != 3 {
		t.Fatalf("edited export: %+v", r.Problem)
	}
}
