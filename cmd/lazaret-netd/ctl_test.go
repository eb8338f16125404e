package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/sidecar/netd"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// upstream answers every A query with 192.0.3.80.
func upstream(t *testing.T) netip.AddrPort {
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
			m.Header.Response, m.Header.RecursionAvailable = true, true
			q := m.Questions[0]
			if q.Type == dnsmessage.TypeA {
				m.Answers = append(m.Answers, dnsmessage.Resource{
					Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body:   &dnsmessage.AResource{A: [4]byte{192, 0, 3, 80}},
				})
			}
			out, _ := m.Pack()
			pc.WriteTo(out, from)
		}
	}()
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

// podNetd runs the real daemon as in a pod (no firewall) with a control
// socket; it returns the socket and the resolver's address.
func podNetd(t *testing.T) (string, netip.AddrPort) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := netip.MustParseAddrPort(l.Addr().String())
	l.Close()
	p, err := netpolicy.FromConfig(nil, []string{"ok.example"})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "control.sock")
	d, err := netd.New(netd.Config{Policy: p, Upstreams: []netip.AddrPort{upstream(t)}, Listen: []netip.AddrPort{listen},
		NoFirewall: true, ControlPath: sock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	cl := &netdapi.Client{Socket: sock}
	for {
		if st, err := cl.Status(ctx); err == nil && st.Applied {
			return sock, listen
		}
		select {
		case err := <-done:
			t.Fatalf("netd stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// runCtl runs `lazaret-netd ctl SOCKET` with req on stdin.
func runCtl(t *testing.T, sock, req string) (int, netdapi.Response, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := ctl(context.Background(), []string{sock}, strings.NewReader(req), &out, &errb)
	var resp netdapi.Response
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
			t.Fatalf("ctl's answer %q: %v", out.String(), err)
		}
	}
	return code, resp, errb.String()
}

// TestCtl: what lazaret-kube asks a pod's netd through an exec reaches
// the daemon and its answer comes back; a name allowed by `decide`
// releases the lookup netd held for the decision; the operations it does
// not forward (secrets, a whole policy, holds) are refused before the
// socket, while the same request sent to the socket directly is taken
// (the control).
func TestCtl(t *testing.T) {
	sock, resolver := podNetd(t)
	code, resp, _ := runCtl(t, sock, `{"version":1,"op":"status"}`)
	if code != 0 || !resp.OK || resp.Status == nil || resp.Status.Firewall != netd.FirewallNone || len(resp.Status.Policy.AllowDomains) != 1 {
		t.Fatalf("status: exit %d %+v", code, resp)
	}
	code, resp, _ = runCtl(t, sock, `{"version":1,"op":"allow","target":"*.docs.example","reason":"proposal 1 approved"}`)
	if code != 0 || !resp.OK || len(resp.Status.Policy.AllowDomains) != 2 {
		t.Fatalf("allow: exit %d %+v", code, resp)
	}
	// netd's own refusal comes back as its answer (exit 0, OK false).
	code, resp, _ = runCtl(t, sock, `{"version":1,"op":"decide","target":"*.x.example","allow":true}`)
	if code != 0 || resp.OK || !strings.Contains(resp.Error, "not an exact domain name") {
		t.Errorf("netd's refusal: exit %d %+v", code, resp)
	}

	// A held lookup is released by an approval's decide.
	direct := &netdapi.Client{Socket: sock}
	if err := direct.Hold(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", resolver.String())
	}}
	type result struct {
		addrs []netip.Addr
		err   error
	}
	got := make(chan result, 1)
	go func() {
		as, err := r.LookupNetIP(context.Background(), "ip4", "held.example")
		got <- result{as, err}
	}()
	for held := false; !held; {
		evs, _, err := direct.Events(context.Background(), 0, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			held = held || (e.Name == "held.example" && e.Held)
		}
	}
	code, resp, _ = runCtl(t, sock, `{"version":1,"op":"decide","target":"held.example","allow":true,"reason":"proposal 2 approved"}`)
	if code != 0 || !resp.OK {
		t.Fatalf("decide: exit %d %+v", code, resp)
	}
	if res := <-got; res.err != nil || len(res.addrs) != 1 || res.addrs[0] != netip.MustParseAddr("192.0.3.80") {
		t.Errorf("the held lookup after the approval: %v %v", res.addrs, res.err)
	}

	for _, bad := range []string{
		`{"version":1,"op":"set_policy","policy":{}}`,
		`{"version":1,"op":"hold","hold_seconds":0}`,
		`{"version":1,"op":"secrets"}`,
		`not json`,
		``,
	} {
		code, resp, stderr := runCtl(t, sock, bad)
		if code != 2 || resp.OK || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d %+v %q, want exit 2 and one line", bad, code, resp, stderr)
		}
	}
	st, err := direct.Status(context.Background())
	if err != nil || len(st.Policy.AllowDomains) != 3 || st.Hold != 30 {
		t.Errorf("after the refused requests: %+v %v, want the policy and hold unchanged", st, err)
	}
	// Control: the daemon itself takes what ctl refused.
	if err := direct.Hold(context.Background(), 0); err != nil {
		t.Errorf("control: hold sent directly: %v", err)
	}

	if code, _, stderr := runCtl(t, filepath.Join(t.TempDir(), "none.sock"), `{"version":1,"op":"status"}`); code != 1 || !strings.Contains(stderr, "not running") {
		t.Errorf("no netd: exit %d %q, want 1", code, stderr)
	}
}
