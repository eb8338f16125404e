package netd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// TestDaemonInNamespace runs the real daemon in a fresh network namespace
// (unshare -rn, so unprivileged users can run it too): ruleset, resolver,
// nflog denials, control socket and expiry. A TUN device shows which
// packets leave the namespace.

const daemonChildEnv = "LAZARET_NETD_NETNS_CHILD"

func TestDaemonInNamespace(t *testing.T) {
	if os.Getenv(daemonChildEnv) == "1" {
		daemonInNamespace(t)
		return
	}
	runInNamespace(t, "TestDaemonInNamespace", daemonChildEnv)
}

// runInNamespace runs the test named test again, with childEnv=1, in a
// fresh user and network namespace (unshare -rn); it skips, saying why,
// where one cannot be made.
func runInNamespace(t *testing.T, test, childEnv string) {
	t.Helper()
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun")
	}
	cmd := exec.Command("unshare", "-rn", os.Args[0], "-test.run", "^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "=== RUN") {
		t.Skipf("cannot make a network namespace here: %s", out)
	}
	if err != nil {
		t.Fatalf("in namespace: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

type tunSeen struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (s *tunSeen) has(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[k]
}

func mustSh(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v %s", args, err, out)
	}
}

func startTun(t *testing.T) *tunSeen {
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var req [unix.IFNAMSIZ + 64]byte
	copy(req[:], "lzt0")
	*(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ])) = unix.IFF_TUN | unix.IFF_NO_PI
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		t.Fatalf("TUNSETIFF: %v", e)
	}
	mustSh(t, "ip", "link", "set", "lzt0", "up")
	mustSh(t, "ip", "addr", "add", "192.0.2.1/24", "dev", "lzt0")
	mustSh(t, "ip", "route", "add", "198.51.100.0/24", "dev", "lzt0")
	mustSh(t, "ip", "route", "add", "192.0.3.0/24", "dev", "lzt0")
	s := &tunSeen{seen: map[string]bool{}}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			if d, ok := netpolicy.ParsePacketDest(buf[:n]); ok {
				s.mu.Lock()
				s.seen[d.String()] = true
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// leaves sends a TCP SYN to dst and reports whether it reached the TUN
// device; a marker to an allowed address, sent after it, bounds the wait.
func (s *tunSeen) leaves(t *testing.T, dst string, marker int) bool {
	t.Helper()
	d := net.Dialer{Timeout: 100 * time.Millisecond}
	if c, err := d.Dial("tcp", dst); err == nil {
		c.Close()
	}
	mk := fmt.Sprintf("192.0.2.10:%d", 1000+marker) // unique per call: a marker seen before would not bound the wait
	deadline := time.Now().Add(10 * time.Second)
	for !s.has("tcp " + mk) {
		if time.Now().After(deadline) {
			out, _ := exec.Command("nft", "list", "chain", "inet", "lazaret", "output").CombinedOutput()
			s.mu.Lock()
			seen := fmt.Sprint(s.seen)
			s.mu.Unlock()
			t.Fatalf("marker %s never arrived; seen %s\n%s", mk, seen, out)
		}
		if c, err := d.Dial("tcp", mk); err == nil {
			c.Close()
		}
	}
	return s.has("tcp " + dst)
}

// fakeUpstream answers A queries with 192.0.3.7, a public address
// (tcp.pkg.example: 192.0.3.8, and over UDP only truncated, so netd must
// retry over TCP; host.pkg.example: 192.0.3.30, which the test calls a
// host address).
func fakeUpstream(t *testing.T) (netip.AddrPort, func() int) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	tl, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close() })
	var mu sync.Mutex
	count := new(int)
	answer := func(b []byte, tcp bool) []byte {
		var m dnsmessage.Message
		if m.Unpack(b) != nil || len(m.Questions) != 1 {
			return nil
		}
		mu.Lock()
		*count++
		mu.Unlock()
		m.Header.Response = true
		m.Additionals = nil
		q := m.Questions[0]
		if q.Name.String() == "tcp.pkg.example." && !tcp {
			m.Header.Truncated = true
		} else if q.Type == dnsmessage.TypeA {
			a := [4]byte{192, 0, 3, 7}
			if tcp {
				a[3] = 8
			}
			if q.Name.String() == "host.pkg.example." {
				a[3] = 30
			}
			m.Answers = []dnsmessage.Resource{{
				Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 600},
				Body:   &dnsmessage.AResource{A: a},
			}}
		}
		out, _ := m.Pack()
		return out
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := answer(buf[:n], false); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			msg, err := readFramed(c)
			if err == nil {
				if out := answer(msg, true); out != nil {
					c.Write(append([]byte{byte(len(out) >> 8), byte(len(out))}, out...))
				}
			}
			c.Close()
		}
	}()
	return netip.MustParseAddrPort(pc.LocalAddr().String()), func() int {
		mu.Lock()
		defer mu.Unlock()
		return *count
	}
}

func daemonInNamespace(t *testing.T) {
	mustSh(t, "ip", "link", "set", "lo", "up")
	tun := startTun(t)
	up, queries := fakeUpstream(t)
	pol, err := netpolicy.FromConfig([]netip.Prefix{netip.MustParsePrefix("192.0.2.0/28")}, []string{"pkg.example", "tcp.pkg.example", "host.pkg.example"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cl, done := runDaemon(t, ctx, Config{Policy: pol, Upstreams: []netip.AddrPort{up},
		Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}, MinTTL: time.Second,
		HostAddrs: []netip.Addr{netip.MustParseAddr("192.0.3.30")}})
	defer func() {
		cancel()
		<-done
	}()

	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var dd net.Dialer
		return dd.DialContext(ctx, network, "127.0.0.1:53")
	}}
	// Before the lookup the address is closed; the lookup opens it.
	if tun.leaves(t, "192.0.3.7:443", 1) {
		t.Fatal("192.0.3.7 open before any lookup")
	}
	addrs, err := res.LookupNetIP(ctx, "ip4", "pkg.example")
	if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("192.0.3.7") {
		t.Fatalf("lookup pkg.example: %v %v", addrs, err)
	}
	if !tun.leaves(t, "192.0.3.7:443", 2) {
		t.Error("resolved address not allowed")
	}
	hostAddressAnswers(t, ctx, tun, res, cl)
	hostAddressAllows(t, ctx, tun, cl)
	// A truncated UDP answer is fetched again over TCP (from a marked
	// socket, like every upstream exchange).
	addrs, err = res.LookupNetIP(ctx, "ip4", "tcp.pkg.example")
	if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("192.0.3.8") {
		t.Errorf("lookup over TCP fallback: %v %v", addrs, err)
	}
	before := queries()
	if _, err := res.LookupNetIP(ctx, "ip4", "evil.example"); err == nil {
		t.Error("evil.example resolved")
	}
	if queries() != before {
		t.Error("a denied name was forwarded upstream")
	}

	// Live allow with expiry.
	if tun.leaves(t, "198.51.100.9:443", 3) {
		t.Fatal("198.51.100.9 open")
	}
	if _, err := cl.Allow(ctx, "198.51.100.0/24", 3*time.Second, "test"); err != nil {
		t.Fatal(err)
	}
	if !tun.leaves(t, "198.51.100.9:443", 4) {
		t.Error("allowed CIDR still closed")
	}
	// A reload keeps the temporary entry until it expires.
	st, err := cl.SetPolicy(ctx, pol, "test reload")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Policy.AllowEgress) != 2 {
		t.Errorf("reload dropped the temporary entry: %+v", st.Policy.AllowEgress)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = cl.Status(ctx)
		if err == nil && len(st.Policy.AllowEgress) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("temporary entry never expired: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if tun.leaves(t, "198.51.100.10:443", 5) {
		out, _ := exec.Command("nft", "list", "table", "inet", "lazaret").CombinedOutput()
		t.Errorf("expired CIDR still open; status %+v\n%s", st.Policy, out)
	}
	if _, err := cl.Allow(ctx, "not a target", 0, "test"); err == nil {
		t.Error("bad target accepted")
	}
	if _, err := cl.Do(ctx, netdapi.Request{Op: "flush"}); err == nil {
		t.Error("unknown op accepted")
	}

	// nflog delivers asynchronously: poll.
	counted := func(dest string) bool {
		st, err := cl.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, den := range st.Denials {
			if den.Dest == dest && den.Count > 0 {
				return true
			}
		}
		return false
	}
	for _, dest := range []string{"dns evil.example", "tcp 198.51.100.10:443"} {
		deadline := time.Now().Add(5 * time.Second)
		for !counted(dest) {
			if time.Now().After(deadline) {
				t.Errorf("denial %q not counted", dest)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	st, err = cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Changes) < 3 {
		t.Errorf("changes not logged: %+v", st.Changes)
	}

	// A policy without pkg.example closes the address it resolved to.
	if !tun.leaves(t, "192.0.3.7:444", 7) {
		t.Fatal("resolved address closed too early")
	}
	if _, err := cl.SetPolicy(ctx, netpolicy.Policy{AllowEgress: pol.AllowEgress}, "test: drop the domain"); err != nil {
		t.Fatal(err)
	}
	if tun.leaves(t, "192.0.3.7:445", 8) {
		t.Error("address of a name no longer allowed still open")
	}

	// Stopping netd leaves the ruleset in place: still closed.
	cancel()
	<-done
	done <- nil
	if tun.leaves(t, "198.51.100.11:443", 9) {
		t.Error("namespace opened when netd stopped")
	}
}

// hostAddressAnswers: an allowed name whose answer is one of the host's
// addresses opens nothing. Positive control: once netd is told the host
// no longer has that address, the same answer opens it; told again, it
// is closed at once.
func hostAddressAnswers(t *testing.T, ctx context.Context, tun *tunSeen, res *net.Resolver, cl *netdapi.Client) {
	t.Helper()
	lookup := func() {
		addrs, err := res.LookupNetIP(ctx, "ip4", "host.pkg.example")
		if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("192.0.3.30") {
			t.Fatalf("lookup host.pkg.example: %v %v", addrs, err)
		}
	}
	lookup()
	if tun.leaves(t, "192.0.3.30:443", 11) {
		t.Error("an answer naming a host address opened it")
	}
	if err := cl.SetHostAddrs(ctx, nil, "test"); err != nil {
		t.Fatal(err)
	}
	lookup()
	if !tun.leaves(t, "192.0.3.30:443", 12) {
		t.Error("control: the same answer without the host address did not open it")
	}
	if err := cl.SetHostAddrs(ctx, []netip.Addr{netip.MustParseAddr("192.0.3.30")}, "test"); err != nil {
		t.Fatal(err)
	}
	if tun.leaves(t, "192.0.3.30:444", 13) {
		t.Error("a resolved address that became the host's stayed open")
	}
}

// hostAddressAllows: no allow opens the host's own address or a metadata
// one. `lazaret net allow` of one is refused (a denial notice the agent
// provoked must not lead the user into opening the host); a CIDR holding
// the host's address is allowed and opens its other addresses (control),
// the host's stays closed.
func hostAddressAllows(t *testing.T, ctx context.Context, tun *tunSeen, cl *netdapi.Client) {
	t.Helper()
	for _, target := range []string{"192.0.3.30", "169.254.169.254", "169.254.0.0/24"} {
		if _, err := cl.Allow(ctx, target, 0, "test"); err == nil || !strings.Contains(err.Error(), "lazaret never opens it") {
			t.Errorf("allow %s: %v", target, err)
		}
	}
	if _, err := cl.Allow(ctx, "192.0.3.0/24", 0, "test"); err != nil {
		t.Fatal(err)
	}
	if !tun.leaves(t, "192.0.3.31:443", 14) {
		t.Error("control: the allowed CIDR is closed")
	}
	if tun.leaves(t, "192.0.3.30:446", 15) {
		out, _ := exec.Command("nft", "list", "table", "inet", "lazaret").CombinedOutput()
		t.Errorf("the host's address inside an allowed CIDR is open\n%s", out)
	}
}

const spareChildEnv = "LAZARET_NETD_SPARE_CHILD"

// TestSpareClaimInNamespace runs netd as a spare in a fresh network
// namespace: the claim replaces whatever policy the spare started with
// and gives it the host's addresses before it answers; a spare is claimed
// once; an unclaimed spare exits at its expiry, a claimed one does not.
func TestSpareClaimInNamespace(t *testing.T) {
	if os.Getenv(spareChildEnv) == "1" {
		spareInNamespace(t)
		return
	}
	runInNamespace(t, "TestSpareClaimInNamespace", spareChildEnv)
}

// runDaemon starts cfg's daemon and waits until it reports its ruleset
// applied; the returned channel carries Run's result.
func runDaemon(t *testing.T, ctx context.Context, cfg Config) (*netdapi.Client, chan error) {
	t.Helper()
	cfg.ControlPath = filepath.Join(t.TempDir(), "netd.sock")
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	cl := &netdapi.Client{Socket: cfg.ControlPath}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := cl.Status(ctx)
		if err == nil && st.Applied {
			return cl, done
		}
		if time.Now().After(deadline) {
			t.Fatalf("never applied: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func spareInNamespace(t *testing.T) {
	mustSh(t, "ip", "link", "set", "lo", "up")
	tun := startTun(t)
	marker := netip.MustParsePrefix("192.0.2.0/28") // tunSeen.leaves's marker
	stale, err := netpolicy.FromConfig([]netip.Prefix{marker, netip.MustParsePrefix("198.51.100.0/24")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listen := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}
	cl, done := runDaemon(t, ctx, Config{Policy: stale, Listen: listen, SpareExpiry: time.Hour, SpareKey: "k1"})

	// Positive control: what the spare started with is open until the
	// claim replaces it.
	if !tun.leaves(t, "198.51.100.9:443", 1) {
		t.Fatal("control: the spare's own policy is closed")
	}
	// Unclaimed, it serves no sandbox: `lazaret net` (a Sandbox client)
	// finds no sidecar, and nothing but a claim changes it.
	user := &netdapi.Client{Socket: cl.Socket, Sandbox: true}
	if _, err := user.Status(ctx); !errors.Is(err, netdapi.ErrUnavailable) {
		t.Errorf("a sandbox's status from an unclaimed spare: %v", err)
	}
	if _, err := cl.Allow(ctx, "192.0.3.0/24", 0, "test"); err == nil || !strings.Contains(err.Error(), "unclaimed spare") {
		t.Errorf("allow on an unclaimed spare: %v", err)
	}
	if err := cl.SetHostAddrs(ctx, nil, "test"); err == nil {
		t.Error("host_addrs on an unclaimed spare accepted")
	}
	want, err := netpolicy.FromConfig([]netip.Prefix{marker, netip.MustParsePrefix("192.0.3.0/24")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	host := []netip.Addr{netip.MustParseAddr("192.0.3.30")}
	if _, err := cl.Claim(ctx, "k2", want, host); err == nil || !strings.Contains(err.Error(), "another configuration") {
		t.Errorf("claim with another key: %v", err)
	}
	if !tun.leaves(t, "198.51.100.9:446", 6) {
		t.Error("a claim with another key changed the policy")
	}
	st, err := cl.Claim(ctx, "k1", want, host)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Applied || len(st.Policy.AllowEgress) != 2 || len(st.HostAddrs) != 1 {
		t.Errorf("claim status: %+v", st)
	}
	if tun.leaves(t, "198.51.100.9:444", 2) {
		t.Error("the spare's policy stayed open after the claim")
	}
	if _, err := user.Status(ctx); err != nil {
		t.Errorf("a sandbox's status from the claimed spare: %v", err)
	}
	if !tun.leaves(t, "192.0.3.31:443", 3) {
		t.Error("the claimed policy is not installed")
	}
	if tun.leaves(t, "192.0.3.30:443", 4) {
		t.Error("the host's address, given with the claim, is open")
	}
	if _, err := cl.Claim(ctx, "k1", stale, nil); err == nil || !strings.Contains(err.Error(), "claimed already") {
		t.Errorf("second claim: %v", err)
	}
	if tun.leaves(t, "198.51.100.9:445", 5) {
		t.Error("a refused claim changed the policy")
	}
	cancel()
	<-done

	// An unclaimed spare exits at its expiry; a daemon that is no spare
	// refuses a claim; a claimed spare outlives its expiry.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	_, done = runDaemon(t, ctx2, Config{Policy: want, Listen: listen, SpareExpiry: 300 * time.Millisecond})
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("expired spare: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("an unclaimed spare did not exit at its expiry")
	}
	cl, done = runDaemon(t, ctx2, Config{Policy: want, Listen: listen})
	if _, err := cl.Claim(ctx2, "", want, host); err == nil || !strings.Contains(err.Error(), "not a spare") {
		t.Errorf("claim of a netd that is no spare: %v", err)
	}
	cancel2()
	<-done
	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	cl, done = runDaemon(t, ctx3, Config{Policy: want, Listen: listen, SpareExpiry: 300 * time.Millisecond})
	if _, err := cl.Claim(ctx3, "", want, host); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Errorf("a claimed spare exited: %v", err)
	case <-time.After(time.Second):
	}
	cancel3()
	<-done
}
