package netd

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

const testPlaceholder = "lzph-00112233445566778899aabbccddeeff"

// TestSecretHostsAnsweredLocally: once netd has secrets, their hosts
// resolve to the injector (A) or to nothing (AAAA) without asking
// upstream, while other allowed names are still forwarded; a DNS name
// carrying a placeholder is counted and reported; the secrets are set
// once.
func TestSecretHostsAnsweredLocally(t *testing.T) {
	d, err := New(Config{Policy: testPolicy(t), InjectListen: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca, err := secret.NewCA([]string{"registry.npmjs.org"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ca.KeyDER()
	roots := ca.CertPEM // any certificate: nothing goes upstream here
	req := netdapi.Request{Version: netdapi.Version, Op: netdapi.OpSecrets, CACert: ca.CertPEM, CAKey: key, Roots: roots,
		Secrets: []secret.Secret{{Name: "npm", Hosts: []string{"registry.npmjs.org"}, Placeholder: testPlaceholder, Value: "v"}}}
	if r := d.handle(ctx, req); !r.OK {
		t.Fatal(r.Error)
	}
	if r := d.handle(ctx, req); r.OK {
		t.Error("secrets accepted twice")
	}
	var m dnsmessage.Message
	if err := m.Unpack(d.resolve(ctx, mkQuery(t, "registry.npmjs.org.", dnsmessage.TypeA))); err != nil {
		t.Fatal(err)
	}
	if len(m.Answers) != 1 || m.Answers[0].Body.(*dnsmessage.AResource).A != [4]byte{127, 0, 0, 1} {
		t.Errorf("A of a secret's host: %+v", m.Answers)
	}
	m.Unpack(d.resolve(ctx, mkQuery(t, "registry.npmjs.org.", dnsmessage.TypeAAAA)))
	if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 {
		t.Errorf("AAAA of a secret's host: %v %+v", m.RCode, m.Answers)
	}
	// Control: another allowed name goes upstream (none here: SERVFAIL).
	m.Unpack(d.resolve(ctx, mkQuery(t, "raw.githubusercontent.com.", dnsmessage.TypeA)))
	if m.RCode != dnsmessage.RCodeServerFailure {
		t.Errorf("a name that is no secret's host was not forwarded: %v", m.RCode)
	}
	d.resolve(ctx, mkQuery(t, testPlaceholder+".githubusercontent.com.", dnsmessage.TypeA))
	evs, _ := d.events.wait(ctx, 0, 0)
	found := false
	for _, ev := range evs {
		found = found || (ev.Secret == "npm" && ev.Name == testPlaceholder+".githubusercontent.com")
	}
	if !found {
		t.Errorf("placeholder in a DNS name not reported: %+v", evs)
	}
	st := d.status()
	if len(st.Secrets) != 1 || st.Secrets[0].Refused != 1 || len(st.Injecting) != 1 {
		t.Errorf("status: %+v %v", st.Secrets, st.Injecting)
	}
	if r := d.handle(ctx, netdapi.Request{Version: netdapi.Version, Op: netdapi.OpSecretValue, Target: "nope", Value: "x"}); r.OK {
		t.Error("a value for an unknown secret was taken")
	}
	if r := d.handle(ctx, netdapi.Request{Version: netdapi.Version, Op: netdapi.OpSecretValue, Target: "npm", Value: "v2"}); !r.OK {
		t.Error(r.Error)
	}
}
