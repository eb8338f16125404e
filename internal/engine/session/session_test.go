package session

import (
	"bytes"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustNew(t testing.TB) *Anchor {
	t.Helper()
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDelegationVerifies(t *testing.T) {
	a := mustNew(t)
	now := time.Now()
	d, err := a.Delegate("sb1", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Delegation.Verify(a.Public, a.ID, "sb1", now); err != nil {
		t.Fatalf("valid delegation rejected: %v", err)
	}
	if !ValidID(a.ID) {
		t.Fatalf("session id %q", a.ID)
	}
}

func TestDelegationRejections(t *testing.T) {
	a, other := mustNew(t), mustNew(t)
	now := time.Now()
	good, _ := a.Delegate("sb1", time.Hour, now)
	forged, _ := other.Delegate("sb1", time.Hour, now)
	forged.Delegation.SessionID = a.ID // claims a's session, signed by other's key
	for _, tc := range []struct {
		name    string
		d       Delegation
		sandbox string
		at      time.Time
		want    error
	}{
		{"expired", good.Delegation, "sb1", now.Add(2 * time.Hour), ErrExpired},
		{"other sandbox", good.Delegation, "sb2", now, ErrWrongSandbox},
		{"other session's key", forged.Delegation, "sb1", now, ErrBadDelegationSig},
		{"modified not_after", func() Delegation { d := good.Delegation; d.NotAfter += 3600 * 24; return d }(), "sb1", now, ErrBadDelegationSig},
		{"modified pub", func() Delegation {
			d := good.Delegation
			d.DelegatedPub = slices.Clone(forged.Delegation.DelegatedPub)
			return d
		}(), "sb1", now, ErrBadDelegationSig},
		{"no signature", func() Delegation { d := good.Delegation; d.Signature = nil; return d }(), "sb1", now, ErrBadDelegation},
	} {
		err := tc.d.Verify(a.Public, a.ID, tc.sandbox, tc.at)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	// Positive control: the forged delegation verifies under the key that made it.
	forged.Delegation.SessionID = other.ID
	forged.Delegation.Signature = ed25519.Sign(other.private, forged.Delegation.Canonical())
	if err := forged.Delegation.Verify(other.Public, other.ID, "sb1", now); err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := good.Delegation.Verify(a.Public, other.ID, "sb1", now); !errors.Is(err, ErrWrongSession) {
		t.Fatalf("other session id: %v", err)
	}
}

func TestEnvRoundTrip(t *testing.T) {
	a := mustNew(t)
	d, _ := a.Delegate("sb1", time.Hour, time.Now())
	env := map[string]string{}
	for _, kv := range d.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if len(env) != 3 {
		t.Fatalf("env %v", env)
	}
	for _, v := range env {
		if strings.Contains(v, string(a.private.Seed())) || strings.Contains(v, string(a.private)) ||
			strings.Contains(v, base64.RawURLEncoding.EncodeToString(a.private.Seed())) {
			t.Fatal("session private key in the exec environment")
		}
	}
	got, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if got.SessionID != a.ID || !got.Key.Equal(d.Key) || !bytes.Equal(got.Delegation.Signature, d.Delegation.Signature) {
		t.Fatal("round trip differs")
	}
	// A delegated key that does not match the delegation is refused.
	other, _ := a.Delegate("sb1", time.Hour, time.Now())
	for _, kv := range other.Env() {
		if k, v, _ := strings.Cut(kv, "="); k == EnvDelegatedKey {
			env[k] = v
		}
	}
	if _, err := FromEnv(func(k string) string { return env[k] }); !errors.Is(err, ErrBadDelegation) {
		t.Fatalf("mismatched key accepted: %v", err)
	}
	// Not a P-256 scalar (zero, the group order, wrong length): refused.
	for _, bad := range [][]byte{make([]byte, 32), {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51}, make([]byte, 31)} {
		env[EnvDelegatedKey] = base64.RawURLEncoding.EncodeToString(bad)
		if _, err := FromEnv(func(k string) string { return env[k] }); !errors.Is(err, ErrBadDelegation) {
			t.Fatalf("scalar %x accepted: %v", bad, err)
		}
	}
}

func TestDelegatedKeyIsP256(t *testing.T) {
	d, _ := mustNew(t).Delegate("sb1", time.Hour, time.Now())
	if d.Key.Curve != elliptic.P256() || len(d.Delegation.DelegatedPub) != DelegatedPubSize || d.Delegation.DelegatedPub[0] != 4 {
		t.Fatalf("delegated key: curve %v, public %d bytes", d.Key.Curve.Params().Name, len(d.Delegation.DelegatedPub))
	}
	// The canonical encoding names the version that delegates P-256 keys.
	if !bytes.HasPrefix(d.Delegation.Canonical(), []byte("lazaret/delegation/v2")) {
		t.Fatal("delegation tag")
	}
}

func TestFromEnvMissing(t *testing.T) {
	_, err := FromEnv(func(string) string { return "" })
	if !errors.Is(err, ErrNoSession) || !strings.Contains(err.Error(), EnvSessionID) {
		t.Fatalf("%v", err)
	}
}

func TestCanonicalDistinguishesFields(t *testing.T) {
	// Moving a byte from one field to the next must change the encoding.
	a := NewEncoder("t").String("ab").String("c").Sum()
	b := NewEncoder("t").String("a").String("bc").Sum()
	if bytes.Equal(a, b) {
		t.Fatal("field boundary not encoded")
	}
	if bytes.Equal(NewEncoder("t").List(nil).Sum(), NewEncoder("t").List([]string{}).Sum()) {
		t.Fatal("absent and empty lists encode the same")
	}
	if bytes.Equal(NewEncoder("a").Sum(), NewEncoder("b").Sum()) {
		t.Fatal("tag not encoded")
	}
}

func TestCanonicalGolden(t *testing.T) {
	got := NewEncoder("x").String("ab").Int64(1).List([]string{"c"}).Bytes([]byte{0xff}).Sum()
	want := []byte{'x', 0, 0, 0, 0, 2, 'a', 'b', 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 'c', 0, 0, 0, 1, 0xff}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding changed:\n got %v\nwant %v", got, want)
	}
}
