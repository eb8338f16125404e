package netd

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// podUpstream is a UDP resolver on loopback that answers A queries from
// answers (name without the trailing dot → addresses).
func podUpstream(t *testing.T, answers map[string][]string) netip.AddrPort {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var m dnsmessage.Message
			if m.Unpack(buf[:n]) != nil || len(m.Questions) != 1 {
				continue
			}
			m.Header.Response = true
			q := m.Questions[0]
			for _, a := range answers[strings.TrimSuffix(q.Name.String(), ".")] {
				m.Answers = append(m.Answers, dnsmessage.Resource{
					Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body:   &dnsmessage.AResource{A: netip.MustParseAddr(a).As4()},
				})
			}
			out, _ := m.Pack()
			pc.WriteTo(out, from)
		}
	}()
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

func freeLoopbackPort(t *testing.T) netip.AddrPort {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return netip.MustParseAddrPort(l.Addr().String())
}

// TestPodModeResolver runs the daemon as in a pod: no firewall, no
// privileges, no control socket. It answers as locally: an allowed name
// resolves, a denied one is NXDOMAIN, and addresses the learn filter
// refuses (private, metadata) never reach the client, since no ruleset
// would keep them closed. Control: the same upstream answer, asked
// directly, does carry them.
func TestPodModeResolver(t *testing.T) {
	up := podUpstream(t, map[string][]string{
		"ok.pod.example":      {"192.0.3.7"},
		"private.pod.example": {"10.1.2.3", "169.254.169.254", "192.0.3.9"},
	})
	listen := freeLoopbackPort(t)
	p, err := netpolicy.FromConfig(nil, []string{"ok.pod.example", "private.pod.example"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Policy: p, Upstreams: []netip.AddrPort{up}, Listen: []netip.AddrPort{listen}, NoFirewall: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for !d.status().Applied { // set once the resolver listens
		select {
		case err := <-done:
			t.Fatalf("netd stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}

	lookup := func(server netip.AddrPort, name string) ([]string, error) {
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "udp", server.String())
		}}
		var out []string
		as, err := r.LookupNetIP(ctx, "ip4", name)
		for _, a := range as {
			out = append(out, a.String())
		}
		slices.Sort(out)
		return out, err
	}
	if got, err := lookup(listen, "ok.pod.example"); err != nil || !slices.Equal(got, []string{"192.0.3.7"}) {
		t.Errorf("allowed name: %v %v", got, err)
	}
	var dnsErr *net.DNSError
	if got, err := lookup(listen, "denied.pod.example"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("denied name: %v %v, want NXDOMAIN", got, err)
	}
	if got, err := lookup(listen, "private.pod.example"); err != nil || !slices.Equal(got, []string{"192.0.3.9"}) {
		t.Errorf("answer with private and metadata addresses: %v %v, want only 192.0.3.9", got, err)
	}
	if got, _ := lookup(up, "private.pod.example"); len(got) != 3 {
		t.Errorf("control: the upstream's own answer is %v, want all three addresses", got)
	}
	st := d.status()
	if st.Firewall != FirewallNone || !st.Applied || len(st.Counters) != 0 {
		t.Errorf("status: firewall %q applied %v counters %v", st.Firewall, st.Applied, st.Counters)
	}
}
