//go:build kube

package kube_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// The tier's pods reach the host over the CNI bridge (scripts/kube-lib.sh:
// KUBE_BRIDGE); the tests' upstream resolver listens on its address.
const (
	bridgeName = "lzkube0"
	// upstreamAnswer is what the upstream answers for every A question: a
	// public address (netd drops documentation and private ones).
	upstreamAnswer = "1.2.3.4"
)

// upstreamNames are names the upstream answers with another address than
// upstreamAnswer (lower-case, with the final dot): a test host on the
// bridge (backend_secrets_test.go).
var upstreamNames sync.Map // string → netip.Addr

var (
	upstreamOnce sync.Once
	upstreamAddr string
	upstreamErr  error
)

// backendUpstream starts (once) a resolver on the bridge's address, port
// 53, answering every A question with upstreamAnswer: the sidecar's
// upstream, standing for the cluster DNS the tier does not run.
func backendUpstream(t *testing.T) string {
	t.Helper()
	ensureBridge(t)
	upstreamOnce.Do(func() {
		var ip netip.Addr
		if ip, upstreamErr = bridgeAddr(); upstreamErr != nil {
			return
		}
		var pc net.PacketConn
		if pc, upstreamErr = net.ListenPacket("udp4", netip.AddrPortFrom(ip, 53).String()); upstreamErr != nil {
			return
		}
		upstreamAddr = netip.AddrPortFrom(ip, 53).String()
		go serveUpstream(pc)
	})
	if upstreamErr != nil {
		t.Fatalf("the tests' upstream resolver: %v", upstreamErr)
	}
	return upstreamAddr
}

// ensureBridge makes the CNI plugin create the bridge when no pod has run
// yet (a test run alone, first): it starts one plain pod and waits until
// it is Ready.
func ensureBridge(t *testing.T) {
	t.Helper()
	if _, err := bridgeAddr(); err == nil {
		return
	}
	c := NewCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := c.Namespace(ctx)
	rc := os.Getenv("LAZARET_KUBE_RUNTIME_CLASS")
	if rc == "" {
		rc = "gvisor"
	}
	c.Apply(ctx, ns, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: bridge}
spec:
  runtimeClassName: %s
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: %q, imagePullPolicy: Never, command: [sleep, "3600"]}]
`, rc, c.TestImage))
	c.MustRun(ctx, "", "wait", "-n", ns, "--for=condition=Ready", "pod/bridge", "--timeout=150s")
}

func bridgeAddr() (netip.Addr, error) {
	ifc, err := net.InterfaceByName(bridgeName)
	if err != nil {
		return netip.Addr{}, err
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			return p.Addr(), nil
		}
	}
	return netip.Addr{}, &net.AddrError{Err: "no IPv4 address", Addr: bridgeName}
}

func serveUpstream(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RecursionAvailable: true})
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		answer := netip.MustParseAddr(upstreamAnswer).As4()
		if a, ok := upstreamNames.Load(strings.ToLower(q.Name.String())); ok {
			answer = a.(netip.Addr).As4()
		}
		if q.Type == dnsmessage.TypeA {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: answer})
		}
		if out, err := b.Finish(); err == nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}

// TestBackendDNSAllowlist: in a sandbox started by lazaret, the sidecar
// answers the profile's allowed domain (through the upstream) and refuses
// every other name. Control: the same name asked of the upstream directly
// resolves — only the sidecar stands between the agent and the answer
// (and, on a cluster that enforces it, the NetworkPolicy, which this
// tier's kernel cannot; docs/KUBERNETES.md).
func TestBackendDNSAllowlist(t *testing.T) {
	e := newBackendEnv(t, "allow_unenforced_egress = true")
	e.setProfile(`allow_domains = ["allowed.e2e.test"]`)
	out := e.mustLazaret(nil, "exec", "e2e", "--", "nslookup", "allowed.e2e.test")
	if !strings.Contains(out, upstreamAnswer) {
		t.Errorf("allowed name:\n%s", out)
	}
	out, _, code := e.lazaret(nil, "exec", "e2e", "--", "nslookup", "denied.e2e.test")
	if code == 0 || strings.Contains(out, upstreamAnswer) {
		t.Errorf("denied name resolved (exit %d):\n%s", code, out)
	}
	out, _, code = e.lazaret(nil, "exec", "e2e", "--", "nslookup", "denied.e2e.test", strings.TrimSuffix(backendUpstream(t), ":53"))
	if code != 0 || !strings.Contains(out, upstreamAnswer) {
		t.Errorf("control: the upstream asked directly (exit %d):\n%s", code, out)
	}
	if got := e.mustLazaret(nil, "exec", "e2e", "--", "cat", "/etc/resolv.conf"); !strings.Contains(got, "nameserver 127.0.0.1") {
		t.Errorf("resolv.conf:\n%s", got)
	}
}

// setProfile adds TOML lines to the e2e profile (the last table of the
// configuration).
func (e *backendEnv) setProfile(lines string) {
	e.t.Helper()
	f, err := os.OpenFile(e.cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(lines + "\n"); err != nil {
		e.t.Fatal(err)
	}
}
