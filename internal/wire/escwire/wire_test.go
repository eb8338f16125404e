package escwire

import (
	"bytes"
	"crypto/ecdsa"
	"errors"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
)

func signed(t testing.TB) (*Request, *ecdsa.PrivateKey) {
	a, _ := session.New()
	d, _ := a.Delegate("sb", time.Hour, time.Unix(1e9, 0))
	r := &Request{RequestID: RandomID(), SessionID: a.ID, Profile: "p1", Cwd: "/workspace", Argv: []string{"make", "lint"},
		Justification: "j", Timestamp: 1e12, Nonce: RandomID(), Delegation: d.Delegation}
	if err := r.Sign(d.Key); err != nil {
		t.Fatal(err)
	}
	return r, d.Key
}

func TestRoundTripAndSignature(t *testing.T) {
	r, _ := signed(t)
	line, _ := r.Encode()
	got, err := Decode(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil || !got.VerifySignature() || !bytes.Equal(got.Canonical(), r.Canonical()) {
		t.Fatalf("round trip: %v", err)
	}
	for name, mod := range map[string]func(*Request){
		"argv":          func(r *Request) { r.Argv = append(r.Argv, "x") },
		"argv split":    func(r *Request) { r.Argv = []string{"make lint"} },
		"command":       func(r *Request) { r.Argv, r.Command = nil, "make lint" },
		"cwd":           func(r *Request) { r.Cwd = "/" },
		"justification": func(r *Request) { r.Justification = "" },
		"timestamp":     func(r *Request) { r.Timestamp++ },
		"nonce":         func(r *Request) { r.Nonce = RandomID() },
		"profile":       func(r *Request) { r.Profile = "p2" },
		"delegation":    func(r *Request) { r.Delegation.NotAfter++ },
	} {
		c := *r
		c.Argv = append([]string(nil), r.Argv...)
		mod(&c)
		if c.VerifySignature() {
			t.Errorf("%s modified after signing still verifies", name)
		}
	}
}

// TestSignatureKeyChecks: only the delegated key's signature verifies; a
// delegated public key that is not a P-256 point verifies nothing; an
// over-long signature does not even decode.
func TestSignatureKeyChecks(t *testing.T) {
	r, _ := signed(t)
	other, _ := signed(t)
	c := *r
	c.Signature = other.Signature
	if c.VerifySignature() {
		t.Fatal("another key's signature verifies")
	}
	c = *r
	c.Delegation.DelegatedPub = append([]byte{0x04}, bytes.Repeat([]byte{1}, 64)...) // not on the curve
	if c.VerifySignature() {
		t.Fatal("a signature verifies under a point off the curve")
	}
	c = *r
	c.Signature = append(append([]byte(nil), r.Signature...), make([]byte, maxSignature)...)
	line, _ := c.Encode()
	if _, err := Decode(line); !errors.Is(err, ErrMalformed) {
		t.Fatalf("over-long signature decoded: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	r, key := signed(t)
	both := *r
	both.Command = "make lint"
	both.Sign(key)
	neither := *r
	neither.Argv = nil
	neither.Sign(key)
	badNonce := *r
	badNonce.Nonce = "1"
	badNonce.Sign(key)
	for name, req := range map[string]*Request{"argv and command": &both, "no command": &neither, "bad nonce": &badNonce} {
		line, _ := req.Encode()
		if _, err := Decode(line); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, s := range []string{"x", `{}{}`, `{"request_id":"x","env":{}}`, string(make([]byte, MaxRequest+1))} {
		if _, err := Decode([]byte(s)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v", s[:min(len(s), 20)], err)
		}
	}
}

// FuzzDecode: no input panics; whatever decodes survives a round trip with
// the same canonical encoding, and verifies only if it is the signed one.
func FuzzDecode(f *testing.F) {
	r, _ := signed(f)
	line, _ := r.Encode()
	f.Add(line)
	f.Add([]byte(`{"request_id":"00000000000000000000000000000000"}`))
	f.Add([]byte(`{"argv":[],"command":""}`))
	p, _ := proposal(f)
	pl, _ := p.Encode()
	f.Add(pl)
	f.Add([]byte(`{"kind":"wait","proposal_id":"0123abcd"}`))
	f.Add([]byte(`{"kind":"propose","proposal":"exec","argv":["make"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Decode(data)
		if err != nil {
			return
		}
		again, err := got.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got2, err := Decode(again)
		if err != nil || !bytes.Equal(got2.Canonical(), got.Canonical()) {
			t.Fatalf("round trip differs: %v", err)
		}
		if got.VerifySignature() && bytes.Equal(got.Delegation.DelegatedPub, r.Delegation.DelegatedPub) && !bytes.Equal(got.Canonical(), r.Canonical()) {
			t.Fatal("a modified request verifies under the delegated key")
		}
	})
}

func TestRandomIDUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := RandomID()
		if seen[id] || !session.ValidID(id) {
			t.Fatal(id)
		}
		seen[id] = true
	}
}
