package netd

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/netpolicy"
)

func mkQuery(t testing.TB, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 77, RecursionDesired: true})
	b.StartQuestions()
	n, err := dnsmessage.NewName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: n, Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func testPolicy(t testing.TB) netpolicy.Policy {
	p, err := netpolicy.FromConfig(nil, []string{"registry.npmjs.org", "*.githubusercontent.com"})
	if err != nil {
		t.Fatal(err)
	}
	return p.Active(time.Now())
}

func TestDecide(t *testing.T) {
	p := testPolicy(t)
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "."
	for _, tc := range []struct {
		name string
		typ  dnsmessage.Type
		want decision
	}{
		{"registry.npmjs.org.", dnsmessage.TypeA, forward},
		{"REGISTRY.npmjs.org.", dnsmessage.TypeAAAA, forward},
		{"registry.npmjs.org.", dnsmessage.TypeTXT, noData},
		{"evil.example.", dnsmessage.TypeA, deny},
		{"npmjs.org.", dnsmessage.TypeA, deny},
		{"raw.githubusercontent.com.", dnsmessage.TypeA, forward},
		{"objects-origin.githubusercontent.com.", dnsmessage.TypeA, forward},
		// Data encoded in labels under an allowed wildcard (DNS tunnelling).
		{"mzxw6ytboi4dkmrtgq2dkzjrg4ydcnzq.githubusercontent.com.", dnsmessage.TypeA, deny},
		{"3f2a9c81d07e4b6a95c2e1f0a7b3d4c8.githubusercontent.com.", dnsmessage.TypeA, deny},
		{long + "githubusercontent.com.", dnsmessage.TypeA, deny},
	} {
		q, err := parseQuery(mkQuery(t, tc.name, tc.typ))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got, why := decide(q, p); got != tc.want {
			t.Errorf("decide(%s %v) = %v (%s), want %v", tc.name, tc.typ, got, why, tc.want)
		}
	}
}

func TestEntropyOfHostNames(t *testing.T) {
	// Real host labels stay under the threshold.
	for _, l := range []string{"objects-origin", "registry-1", "d3uq3jmfhaxb4s", "production-eu-west-1", "githubusercontent", "ip-172-31-20-15", "codeload-production"} {
		if looksEncoded(l) {
			t.Errorf("%s: entropy %.2f would be refused", l, entropy(l))
		}
	}
}

func TestParseQueryRejects(t *testing.T) {
	good := mkQuery(t, "a.example.", dnsmessage.TypeA)
	resp := append([]byte{}, good...)
	resp[2] |= 0x80 // QR: a response, not a query
	for name, b := range map[string][]byte{"empty": nil, "short": good[:5], "response": resp} {
		if _, err := parseQuery(b); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	two := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1})
	two.StartQuestions()
	n := dnsmessage.MustNewName("a.example.")
	two.Question(dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	two.Question(dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	b, _ := two.Finish()
	if _, err := parseQuery(b); err == nil {
		t.Error("two questions accepted")
	}
}

func TestReplyNXDOMAIN(t *testing.T) {
	q, err := parseQuery(mkQuery(t, "evil.example.", dnsmessage.TypeA))
	if err != nil {
		t.Fatal(err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(reply(q, dnsmessage.RCodeNameError)); err != nil {
		t.Fatal(err)
	}
	if m.Header.ID != 77 || !m.Header.Response || m.Header.RCode != dnsmessage.RCodeNameError || len(m.Questions) != 1 {
		t.Errorf("reply %+v", m.Header)
	}
}

func upstreamAnswer(t *testing.T, id uint16, q dnsmessage.Question, ttl uint32) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, Response: true, RecursionAvailable: true})
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	b.CNAMEResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: ttl},
		dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("cdn.example.net.")})
	b.AResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName("cdn.example.net."), Class: dnsmessage.ClassINET, TTL: ttl},
		dnsmessage.AResource{A: [4]byte{203, 0, 113, 7}})
	b.StartAdditionals()
	b.AResource(dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName("glue.example.net."), Class: dnsmessage.ClassINET, TTL: ttl},
		dnsmessage.AResource{A: [4]byte{198, 51, 100, 1}})
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReadAnswer(t *testing.T) {
	q, err := parseQuery(mkQuery(t, "registry.npmjs.org.", dnsmessage.TypeA))
	if err != nil {
		t.Fatal(err)
	}
	out, ls, err := readAnswer(upstreamAnswer(t, 900, q.question, 86400), 900, q, 30*time.Second, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].addr != netip.MustParseAddr("203.0.113.7") || ls[0].ttl != time.Hour {
		t.Errorf("learned %+v (want 203.0.113.7 clamped to 1h)", ls)
	}
	var m dnsmessage.Message
	if err := m.Unpack(out); err != nil {
		t.Fatal(err)
	}
	if m.Header.ID != 77 || len(m.Additionals) != 0 || m.Answers[0].Header.TTL != 3600 {
		t.Errorf("rewritten answer: id %d, additionals %d, ttl %d", m.Header.ID, len(m.Additionals), m.Answers[0].Header.TTL)
	}
	// A short TTL is raised to the minimum for the allow set.
	_, ls, _ = readAnswer(upstreamAnswer(t, 901, q.question, 1), 901, q, 30*time.Second, time.Hour)
	if len(ls) != 1 || ls[0].ttl != 30*time.Second {
		t.Errorf("min clamp: %+v", ls)
	}
	if _, _, err := readAnswer(upstreamAnswer(t, 5, q.question, 60), 6, q, time.Second, time.Hour); err == nil {
		t.Error("answer with the wrong id accepted")
	}
	other, _ := parseQuery(mkQuery(t, "evil.example.", dnsmessage.TypeA))
	if _, _, err := readAnswer(upstreamAnswer(t, 7, other.question, 60), 7, q, time.Second, time.Hour); err == nil {
		t.Error("answer to another question accepted")
	}
}

// FuzzQuery drives the whole path of an untrusted query that does not
// need the network: parse, decide, build the reply or the upstream query.
func FuzzQuery(f *testing.F) {
	f.Add(mkQuery(f, "registry.npmjs.org.", dnsmessage.TypeA))
	f.Add(mkQuery(f, "x.githubusercontent.com.", dnsmessage.TypeAAAA))
	f.Add(mkQuery(f, "evil.example.", dnsmessage.TypeTXT))
	f.Add([]byte{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1}) // compression loop
	p := testPolicy(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := parseQuery(b)
		if err != nil {
			return
		}
		d, _ := decide(q, p)
		if d == forward {
			if !p.AllowsName(q.name) {
				t.Fatalf("forwarding %q, which is not allowed", q.name)
			}
			if _, msg, err := upstreamQuery(q); err != nil || len(msg) == 0 {
				t.Fatalf("upstream query for %q: %v", q.name, err)
			}
			return
		}
		if r := reply(q, dnsmessage.RCodeNameError); r == nil {
			t.Fatalf("no reply for %q", q.name)
		}
	})
}

// FuzzReadAnswer feeds arbitrary upstream answers (the upstream is
// trusted, but a broken one must not crash netd).
func FuzzReadAnswer(f *testing.F) {
	q0 := dnsmessage.Question{Name: dnsmessage.MustNewName("registry.npmjs.org."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 9, Response: true})
	b.StartQuestions()
	b.Question(q0)
	b.StartAnswers()
	b.AResource(dnsmessage.ResourceHeader{Name: q0.Name, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: [4]byte{1, 2, 3, 4}})
	seed, _ := b.Finish()
	f.Add(seed)
	f.Fuzz(func(t *testing.T, resp []byte) {
		q := query{id: 1, question: q0, name: "registry.npmjs.org"}
		out, ls, err := readAnswer(resp, 9, q, time.Second, time.Hour)
		if err != nil {
			return
		}
		if len(out) == 0 {
			t.Fatal("empty rewritten answer")
		}
		for _, l := range ls {
			if l.ttl < time.Second || l.ttl > time.Hour {
				t.Fatalf("ttl %v outside the clamp", l.ttl)
			}
		}
	})
}

func TestRebindable(t *testing.T) {
	for a, want := range map[string]bool{
		"10.1.2.3": true, "192.168.1.1": true, "172.16.0.1": true, "127.0.0.1": true, "100.64.0.1": true,
		"169.254.169.254": true, "fd00::1": true, "fe80::1": true, "::1": true, "0.0.0.0": true, "224.0.0.1": true,
		"140.82.112.3": false, "192.0.2.20": false, "2606:4700::1": false,
	} {
		if got := rebindable(netip.MustParseAddr(a)); got != want {
			t.Errorf("rebindable(%s) = %v, want %v", a, got, want)
		}
	}
}
