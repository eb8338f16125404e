package netd

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
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
	f.Add(answerWith(f, 9, q0, rrA("stray.example.", "140.82.112.9", 60), rrCNAME("registry.npmjs.org.", "cdn.example.net."),
		rrA("cdn.example.net.", "140.82.112.8", 0), rrAAAA("cdn.example.net.", "2606:4700::1")))
	f.Fuzz(func(t *testing.T, resp []byte) {
		q := query{id: 1, question: q0, name: "registry.npmjs.org"}
		out, ls, err := readAnswer(resp, 9, q, time.Second, time.Hour)
		if err != nil {
			return
		}
		if len(out) == 0 {
			t.Fatal("empty rewritten answer")
		}
		if len(ls) > maxLearned {
			t.Fatalf("%d addresses learned from one answer", len(ls))
		}
		for _, l := range ls {
			if l.ttl < time.Second || l.ttl > time.Hour {
				t.Fatalf("ttl %v outside the clamp", l.ttl)
			}
		}
		// Whatever is learned is also in the answer returned, and only A
		// records (the question's type) are learned.
		var m dnsmessage.Message
		if err := m.Unpack(out); err != nil {
			t.Fatalf("rewritten answer does not parse: %v", err)
		}
		as := 0
		for _, rr := range m.Answers {
			if rr.Header.Type == dnsmessage.TypeA {
				as++
			}
		}
		if as != len(ls) || len(m.Additionals) != 0 || len(m.Authorities) != 0 {
			t.Fatalf("learned %d, returned %d A records, %d additionals, %d authorities", len(ls), as, len(m.Additionals), len(m.Authorities))
		}
		for _, l := range ls {
			if !l.addr.Is4() {
				t.Fatalf("non-A address %s learned for an A query", l.addr)
			}
		}
	})
}

// answerWith builds an upstream answer to q holding rrs.
func answerWith(t testing.TB, id uint16, q dnsmessage.Question, rrs ...dnsmessage.Resource) []byte {
	t.Helper()
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: id, Response: true}, Questions: []dnsmessage.Question{q}, Answers: rrs}
	out, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func rrA(name, addr string, ttl uint32) dnsmessage.Resource {
	return dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: ttl},
		Body: &dnsmessage.AResource{A: netip.MustParseAddr(addr).As4()}}
}

func rrAAAA(name, addr string) dnsmessage.Resource {
	return dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeAAAA, Class: dnsmessage.ClassINET, TTL: 60},
		Body: &dnsmessage.AAAAResource{AAAA: netip.MustParseAddr(addr).As16()}}
}

func rrCNAME(name, target string) dnsmessage.Resource {
	return dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeCNAME, Class: dnsmessage.ClassINET, TTL: 60},
		Body: &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(target)}}
}

// TestReadAnswerKeepsTheChain: only records on the CNAME chain of the name
// asked, of the type asked, are learned and returned; a record for a name
// not asked, a record of another type and records past the cap are
// dropped from both. A mapped AAAA stays IPv6 (for the filter to refuse).
// Positive control: the same addresses on the chain are learned.
func TestReadAnswerKeepsTheChain(t *testing.T) {
	q, err := parseQuery(mkQuery(t, "Registry.npmjs.org.", dnsmessage.TypeA))
	if err != nil {
		t.Fatal(err)
	}
	resp := answerWith(t, 5, q.question,
		rrA("other.example.", "140.82.112.9", 60),    // not asked
		rrA("cdn2.example.net.", "140.82.112.8", 60), // on the chain, listed before its CNAME
		rrCNAME("cdn1.example.net.", "cdn2.example.net."),
		rrCNAME("registry.npmjs.org.", "CDN1.example.net."),
		rrAAAA("cdn2.example.net.", "2606:4700::1"), // another type
		rrA("registry.npmjs.org.", "140.82.112.7", 0),
	)
	out, ls, err := readAnswer(resp, 5, q, 30*time.Second, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.addr.String())
		if l.ttl != 30*time.Second && l.ttl != time.Minute {
			t.Errorf("%s ttl %v", l.addr, l.ttl)
		}
	}
	if strings.Join(got, " ") != "140.82.112.8 140.82.112.7" {
		t.Errorf("learned %v; want the chain's A records only", got)
	}
	var m dnsmessage.Message
	if err := m.Unpack(out); err != nil {
		t.Fatal(err)
	}
	if len(m.Answers) != 4 {
		t.Errorf("answer returned has %d records, want 4 (2 CNAME, 2 A): %+v", len(m.Answers), m.Answers)
	}

	q6, _ := parseQuery(mkQuery(t, "registry.npmjs.org.", dnsmessage.TypeAAAA))
	_, ls, err = readAnswer(answerWith(t, 6, q6.question, rrAAAA("registry.npmjs.org.", "::ffff:169.254.169.254")), 6, q6, time.Second, time.Hour)
	if err != nil || len(ls) != 1 || !ls[0].addr.Is4In6() {
		t.Errorf("mapped AAAA learned as %+v, %v; want it kept IPv6", ls, err)
	}
	var huge []dnsmessage.Resource
	for i := range 300 {
		huge = append(huge, rrA("registry.npmjs.org.", netip.AddrFrom4([4]byte{140, 82, byte(i >> 8), byte(i)}).String(), 60))
	}
	out, ls, err = readAnswer(answerWith(t, 7, q.question, huge...), 7, q, time.Second, time.Hour)
	if err != nil || len(ls) != maxLearned {
		t.Errorf("huge answer: learned %d, %v; want %d", len(ls), err, maxLearned)
	}
	if err := m.Unpack(out); err != nil || len(m.Answers) != maxLearned {
		t.Errorf("huge answer: %d records returned", len(m.Answers))
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestAdmitFiltersAndGrace: the daemon's bookkeeping with a fake clock.
// An answer's host, metadata, loopback, private and slirp addresses are
// refused (and counted); a public one is admitted for the grace period
// rather than its 60 s TTL, renewed by the next answer, and forgotten
// after the grace period without one. Positive control: with no host
// addresses given, the same host address is admitted.
func TestAdmitFiltersAndGrace(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	host := netip.MustParseAddr("140.82.112.50")
	d, err := New(Config{HostAddrs: []netip.Addr{host}, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	pub := netip.MustParseAddr("140.82.112.3")
	var ls []learned
	for _, s := range []string{"140.82.112.50", "169.254.169.254", "127.0.0.1", "10.0.2.2", "10.0.2.3", "192.168.1.1", "fd00:ec2::254", "::ffff:140.82.112.50", "64:ff9b::8c52:7032", pub.String()} {
		ls = append(ls, learned{netip.MustParseAddr(s), time.Minute})
	}
	rs := d.admit("registry.npmjs.org", ls)
	if len(rs) != 1 || rs[0].Addr != pub || rs[0].TTL != DefaultGrace || rs[0].Refresh {
		t.Fatalf("admitted %+v; want only %s for %v", rs, pub, DefaultGrace)
	}
	if st := d.status(); len(st.Denials) != len(ls)-1 {
		t.Errorf("refused addresses counted %d times: %+v", len(st.Denials), st.Denials)
	}
	d.remember("registry.npmjs.org", rs)

	// 5 minutes later (past the TTL) it is still open; a new answer
	// renews it for another grace period.
	clk.t = clk.t.Add(5 * time.Minute)
	if len(d.status().Resolved) != 1 {
		t.Fatal("resolved address forgotten at the end of its TTL")
	}
	rs = d.admit("registry.npmjs.org", ls)
	if len(rs) != 1 || !rs[0].Refresh || rs[0].TTL != DefaultGrace {
		t.Fatalf("second answer %+v; want a refresh for %v", rs, DefaultGrace)
	}
	d.remember("registry.npmjs.org", rs)
	clk.t = clk.t.Add(DefaultGrace - time.Second)
	if len(d.status().Resolved) != 1 {
		t.Error("renewed address forgotten before the grace period ended")
	}
	clk.t = clk.t.Add(2 * time.Second)
	if n := len(d.status().Resolved); n != 0 {
		t.Errorf("address kept %d entries past the grace period", n)
	}
	// A TTL longer than the grace period wins.
	if rs := d.admit("x", []learned{{pub, 30 * time.Minute}}); rs[0].TTL != 30*time.Minute {
		t.Errorf("long TTL shortened to %v", rs[0].TTL)
	}

	// Positive control: without host addresses the same answer admits
	// the host address (and only it and the public one).
	d2, _ := New(Config{Now: clk.now})
	rs = d2.admit("registry.npmjs.org", ls)
	var got []string
	for _, r := range rs {
		got = append(got, r.Addr.String())
	}
	if strings.Join(got, " ") != "140.82.112.50 64:ff9b::8c52:7032 140.82.112.3" {
		t.Errorf("without host addresses admitted %v", got)
	}
}

// TestAdmitNoticeTrueForPolicy: an answer address the learn filter
// refuses but an allowed CIDR opens is reachable, so it raises no denial
// (its notice said "never opened" while the traffic worked); one no CIDR
// opens is reported, with NeverOpened set only for what no policy can open.
// Control: without the CIDR the same address is reported.
func TestAdmitNoticeTrueForPolicy(t *testing.T) {
	answer := []learned{{netip.MustParseAddr("192.168.1.7"), time.Minute}, {netip.MustParseAddr("169.254.169.254"), time.Minute}, {netip.MustParseAddr("10.0.2.2"), time.Minute}}
	events := func(pol netpolicy.Policy) map[string]string {
		d, err := New(Config{Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		d.admit("intranet.example", answer)
		evs, _, _ := d.events.since(0)
		got := map[string]string{}
		for _, ev := range evs {
			addr, _, _ := strings.Cut(strings.SplitN(ev.Dest, " -> ", 2)[1], " ")
			got[addr] = ev.NeverOpened
		}
		return got
	}
	open := netpolicy.Policy{AllowEgress: []netpolicy.CIDR{{Prefix: netip.MustParsePrefix("192.168.0.0/16")}, {Prefix: netip.MustParsePrefix("169.254.0.0/16")}}}
	got := events(open)
	if _, ok := got["192.168.1.7"]; ok {
		t.Errorf("an address the CIDR opens was reported: %v", got)
	}
	if got["169.254.169.254"] != netpolicy.NeverMetadata {
		t.Errorf("metadata address: %v", got)
	}
	if never, ok := got["10.0.2.2"]; !ok || never != "" {
		t.Errorf("an address no CIDR opens: %v", got)
	}
	if never, ok := events(netpolicy.Policy{})["192.168.1.7"]; !ok || never != "" {
		t.Errorf("control: without the CIDR the address is not reported")
	}
}
