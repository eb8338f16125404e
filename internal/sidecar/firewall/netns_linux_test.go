package firewall

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// The tests in this file install the real ruleset in a fresh network
// namespace (unshare -rn: a user namespace makes it work unprivileged) and
// watch a TUN interface: a packet the policy accepts appears on the TUN
// device, a denied one never does. Each check has a positive control: the
// same packet before the ruleset is installed does appear.

const childEnv = "LAZARET_NETPOLICY_NETNS_CHILD"

func TestRulesInNetworkNamespace(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		runInNamespace(t)
		return
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not installed")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not installed")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun")
	}
	cmd := exec.Command("unshare", "-rn", os.Args[0], "-test.run", "^TestRulesInNetworkNamespace$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "unshare failed") || strings.Contains(string(out), "Operation not permitted") && err != nil && !strings.Contains(string(out), "=== RUN") {
		t.Skipf("cannot make a network namespace here: %s", out)
	}
	if err != nil {
		t.Fatalf("in namespace: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

type tunWatch struct {
	mu   sync.Mutex
	seen []string // "proto dst:port"
}

func (w *tunWatch) has(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.seen {
		if x == s {
			return true
		}
	}
	return false
}

func openTun(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var req [unix.IFNAMSIZ + 64]byte
	copy(req[:], name)
	*(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ])) = unix.IFF_TUN | unix.IFF_NO_PI
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		t.Fatalf("TUNSETIFF: %v", e)
	}
	return f
}

func (w *tunWatch) read(f *os.File) {
	buf := make([]byte, 65536)
	for {
		n, err := f.Read(buf)
		if err != nil {
			return
		}
		if d, ok := netpolicy.ParsePacketDest(buf[:n]); ok {
			w.mu.Lock()
			w.seen = append(w.seen, d.String())
			w.mu.Unlock()
		}
	}
}

func sh(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v %s", args, err, out)
	}
}

// probe sends one packet to dst (proto "tcp" or "udp"); with mark, the
// socket carries netd's upstream mark.
func probe(proto, dst string, mark uint32) {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	if mark != 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark)) })
			return serr
		}
	}
	c, err := d.DialContext(context.Background(), proto, dst)
	if err == nil {
		if proto == "udp" {
			c.Write([]byte("x"))
		}
		c.Close()
	}
}

// expect sends every probe, then a marker the policy always lets through,
// and once the marker is on the TUN device (packets arrive in order) checks
// which probes went out.
func (w *tunWatch) expect(t *testing.T, marker string, probes map[string]bool) {
	t.Helper()
	for p := range probes {
		proto, dst, _ := strings.Cut(p, " ")
		mark := uint32(0)
		if strings.HasSuffix(dst, "+mark") {
			dst, mark = strings.TrimSuffix(dst, "+mark"), netpolicy.UpstreamMark
		}
		probe(proto, dst, mark)
	}
	proto, dst, _ := strings.Cut(marker, " ")
	deadline := time.Now().Add(10 * time.Second)
	for !w.has(marker) {
		if time.Now().After(deadline) {
			t.Fatalf("marker %s never reached the TUN device", marker)
		}
		probe(proto, dst, 0)
		time.Sleep(20 * time.Millisecond)
	}
	for p, want := range probes {
		key := strings.TrimSuffix(p, "+mark")
		if got := w.has(key); got != want {
			t.Errorf("%s: left the namespace = %v, want %v", p, got, want)
		}
	}
}

func runInNamespace(t *testing.T) {
	sh(t, "ip", "link", "set", "lo", "up")
	tun := openTun(t, "lzt0")
	defer tun.Close()
	sh(t, "ip", "link", "set", "lzt0", "up")
	sh(t, "ip", "addr", "add", "192.0.2.1/24", "dev", "lzt0")
	sh(t, "ip", "-6", "addr", "add", "2001:db8::1/64", "dev", "lzt0", "nodad")
	sh(t, "ip", "route", "add", "169.254.0.0/16", "dev", "lzt0")
	sh(t, "ip", "route", "add", "198.51.100.0/24", "dev", "lzt0")
	w := &tunWatch{}
	go w.read(tun)

	all := map[string]bool{
		"tcp 192.0.2.10:80":      true,
		"tcp 192.0.2.200:80":     true,
		"udp 192.0.2.200:9":      true,
		"tcp 169.254.169.254:80": true,
		"udp 192.0.2.10:53":      true,
		"tcp [2001:db8::10]:80":  true,
		"tcp [2001:db8::200]:80": true,
		"tcp 198.51.100.7:443":   true,
		"tcp 192.0.2.20:80":      true,
		"tcp [2001:db8::20]:80":  true,
	}
	// Positive control: with no ruleset every probe leaves the namespace.
	w.expect(t, "udp 192.0.2.10:7", all)

	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	p, err := netpolicy.FromConfig([]netip.Prefix{
		netip.MustParsePrefix("192.0.2.0/25"),
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("2001:db8::/120"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The host's own addresses (192.0.2.20, 2001:db8::20 here), inside
	// the allowed CIDRs.
	host := []netip.Addr{netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("2001:db8::20")}
	if err := Install(c, netpolicy.Build(p.Active(time.Now()), host)); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.seen = nil
	w.mu.Unlock()
	w.expect(t, "udp 192.0.2.10:8", map[string]bool{
		"tcp 192.0.2.10:80":      true,  // allowed CIDR
		"tcp 192.0.2.200:80":     false, // outside it
		"udp 192.0.2.200:9":      false,
		"tcp 169.254.169.254:80": false, // metadata inside an allowed CIDR
		"udp 192.0.2.10:53":      false, // DNS to an allowed address, not netd
		"udp 192.0.2.11:53+mark": true,  // netd's marked upstream socket
		"tcp [2001:db8::10]:80":  true,
		"tcp [2001:db8::200]:80": false,
		"tcp 198.51.100.7:443":   false,
		"tcp 192.0.2.20:80":      false, // the host's address inside an allowed CIDR
		"tcp [2001:db8::20]:80":  false,
	})

	// Control: the same addresses leave once they are no longer the
	// host's (a live update of the host sets), and are refused again when
	// they are.
	for i, step := range []struct {
		host []netip.Addr
		open bool
	}{{nil, true}, {host, false}} {
		if err := ReplaceHost(c, step.host); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		w.seen = nil
		w.mu.Unlock()
		w.expect(t, fmt.Sprintf("udp 192.0.2.10:%d", 5-i), map[string]bool{"tcp 192.0.2.20:80": step.open, "tcp [2001:db8::20]:80": step.open})
	}

	// Live updates: widen the allow set, add a resolved address; the
	// table is not replaced.
	v4, v6 := netpolicy.AllowSets(netpolicy.Policy{AllowEgress: []netpolicy.CIDR{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}, {Prefix: netip.MustParsePrefix("2001:db8::/120")}}})
	if err := ReplaceAllow(c, v4, v6); err != nil {
		t.Fatal(err)
	}
	if err := AddResolved(c, []Resolved{{Addr: netip.MustParseAddr("198.51.100.7"), TTL: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	// Refreshing an address already present renews it in place.
	if err := AddResolved(c, []Resolved{{Addr: netip.MustParseAddr("198.51.100.7"), TTL: time.Hour, Refresh: true}}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.seen = nil
	w.mu.Unlock()
	w.expect(t, "udp 192.0.2.10:6", map[string]bool{
		"tcp 192.0.2.200:80":     true,
		"tcp 198.51.100.7:443":   true,
		"tcp 198.51.100.8:443":   false,
		"tcp 169.254.169.254:80": false,
	})

	ctr, err := Counters(c)
	if err != nil {
		t.Fatal(err)
	}
	if ctr["deny default"] == 0 || ctr["deny metadata ipv4"] == 0 || ctr["deny other dns udp"] == 0 {
		t.Errorf("deny counters not counting: %v", ctr)
	}
}
