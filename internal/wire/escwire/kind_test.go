package escwire

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/session"
)

// proposal is a signed network proposal and its key.
func proposal(t testing.TB) (*Request, func(*Request)) {
	a, _ := session.New()
	d, _ := a.Delegate("sb", time.Hour, time.Unix(1e9, 0))
	r := &Request{RequestID: RandomID(), SessionID: a.ID, Profile: "p1", Cwd: "/workspace", Kind: KindPropose,
		Proposal: ProposeNet, Target: "example.org:443", Justification: "docs", Timestamp: 1e12, Nonce: RandomID(), Delegation: d.Delegation}
	sign := func(r *Request) {
		if err := r.Sign(d.Key); err != nil {
			t.Fatal(err)
		}
	}
	sign(r)
	return r, sign
}

// TestKindSigned: the kind and every proposal field are covered by the
// signature; positive control: the unaltered proposal decodes and
// verifies.
func TestKindSigned(t *testing.T) {
	r, _ := proposal(t)
	line, _ := r.Encode()
	got, err := Decode(line)
	if err != nil || !got.VerifySignature() {
		t.Fatalf("control: the unaltered proposal does not verify: %v", err)
	}
	for name, mod := range map[string]func(*Request){
		"kind":        func(r *Request) { r.Kind = KindWait },
		"kind empty":  func(r *Request) { r.Kind = KindEscalate },
		"proposal":    func(r *Request) { r.Proposal = ProposeExec },
		"target":      func(r *Request) { r.Target = "example.org:444" },
		"proposal_id": func(r *Request) { r.ProposalID = "0123abcd" },
		"why":         func(r *Request) { r.Justification = "other" },
	} {
		c := *r
		mod(&c)
		if c.VerifySignature() {
			t.Errorf("%s altered after signing still verifies", name)
		}
	}
	// An escalation signed as v3 is not a proposal either way round.
	esc, _ := signed(t)
	c := *esc
	c.Kind = KindDenials
	if c.VerifySignature() {
		t.Error("an escalation turned into a denials request still verifies")
	}
}

// TestKindFields: each kind carries its own fields and no other.
func TestKindFields(t *testing.T) {
	base, sign := proposal(t)
	ok := map[string]func(*Request){
		"net":      func(r *Request) {},
		"net cidr": func(r *Request) { r.Target = "192.0.2.0/24" },
		"exec":     func(r *Request) { r.Proposal, r.Target, r.Argv = ProposeExec, "", []string{"make", "lint"} },
		"wait":     func(r *Request) { r.Kind, r.Proposal, r.Target, r.ProposalID = KindWait, "", "", "0123abcd" },
		"denials":  func(r *Request) { r.Kind, r.Proposal, r.Target = KindDenials, "", "" },
	}
	bad := map[string]func(*Request){
		"unknown kind":        func(r *Request) { r.Kind = "escalate" },
		"unknown proposal":    func(r *Request) { r.Proposal = "dns" },
		"net without target":  func(r *Request) { r.Target = "" },
		"net with argv":       func(r *Request) { r.Argv = []string{"x"} },
		"net with command":    func(r *Request) { r.Command = "x" },
		"10 kB name":          func(r *Request) { r.Target = strings.Repeat("a", 10<<10) },
		"exec without argv":   func(r *Request) { r.Proposal, r.Target = ProposeExec, "" },
		"exec with target":    func(r *Request) { r.Proposal, r.Argv = ProposeExec, []string{"make"} },
		"proposal with id":    func(r *Request) { r.ProposalID = "0123abcd" },
		"wait bad id":         func(r *Request) { r.Kind, r.Proposal, r.Target, r.ProposalID = KindWait, "", "", "0123ABCD" },
		"wait with target":    func(r *Request) { r.Kind, r.Proposal, r.ProposalID = KindWait, "", "0123abcd" },
		"denials with target": func(r *Request) { r.Kind, r.Proposal = KindDenials, "" },
		"escalation with target": func(r *Request) {
			r.Kind, r.Proposal, r.Argv = KindEscalate, "", []string{"make"}
		},
	}
	for name, mod := range ok {
		c := *base
		mod(&c)
		sign(&c)
		line, _ := c.Encode()
		if got, err := Decode(line); err != nil || !got.VerifySignature() {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, mod := range bad {
		c := *base
		mod(&c)
		sign(&c)
		line, _ := c.Encode()
		if _, err := Decode(line); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: decoded (%v)", name, err)
		}
	}
	if !ValidProposalID("0123abcd") || ValidProposalID("0123abc") || ValidProposalID("0123abcg") {
		t.Error("ValidProposalID")
	}
}
