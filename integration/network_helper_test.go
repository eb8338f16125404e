//go:build integration

package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"syscall"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// The network tests mount this test binary into their containers and run
// it as a test host (server) or a probe (client). init runs before
// TestMain, whose refusal to run as root would otherwise stop it: inside a
// container the helper is root.
const netHelperEnv = "LAZARET_NETHELPER"

func init() {
	if mode := os.Getenv(netHelperEnv); mode != "" {
		os.Exit(netHelper(mode, os.Args[1:]))
	}
}

func netHelper(mode string, args []string) int {
	switch mode {
	case "serve":
		return serve()
	case "probe":
		if err := probeCmd(args); err != nil {
			fmt.Println("FAIL", err)
			return 1
		}
		fmt.Println("OK")
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// serve is a test host: TCP "ok" on :80, TCP echo on :7, UDP sink on :9
// and a DNS server on :53 answering *.test names (testAnswers).
// Every UDP datagram and DNS question is printed (podman logs reads them).
func serve() int {
	out := make(chan string, 100)
	go func() {
		for l := range out {
			fmt.Println(l)
		}
	}()
	tcp := func(port string, h func(net.Conn)) {
		l, err := net.Listen("tcp", ":"+port)
		if err != nil {
			fmt.Println("listen", port, err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); h(c) }()
			}
		}()
	}
	tcp("80", func(c net.Conn) { io.WriteString(c, "ok\n") })
	tcp("7", func(c net.Conn) { io.Copy(c, c) })
	udp9, err := net.ListenPacket("udp", ":9")
	if err != nil {
		fmt.Println("listen 9", err)
		return 1
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := udp9.ReadFrom(buf)
			if err != nil {
				return
			}
			out <- "udp9 " + string(buf[:n])
		}
	}()
	out <- "ready"
	// The server's addresses are added after it starts (the test wires
	// it); bind the DNS address once it exists.
	var dns net.PacketConn
	for {
		var err error
		if dns, err = net.ListenPacket("udp", "192.0.2.53:53"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	out <- "dns-ready"
	buf := make([]byte, 2048)
	for {
		n, from, err := dns.ReadFrom(buf)
		if err != nil {
			return 1
		}
		var m dnsmessage.Message
		if m.Unpack(buf[:n]) != nil || len(m.Questions) != 1 {
			continue
		}
		q := m.Questions[0]
		out <- fmt.Sprintf("dns %s %s", strings.TrimSuffix(q.Name.String(), "."), q.Type)
		m.Header.Response, m.Header.RecursionAvailable = true, true
		m.Additionals = nil
		if !strings.HasSuffix(q.Name.String(), ".test.") {
			m.Header.RCode = dnsmessage.RCodeNameError
		} else {
			m.Answers = testAnswers(q)
		}
		if b, err := m.Pack(); err == nil {
			dns.WriteTo(b, from)
		}
	}
}

// testAnswerTable is what the test DNS server answers, by the first label
// of a *.test name: the hostile answers an allowed name may carry (each
// pointing at a range netd must never open) and, for any other name, the
// public test host 192.0.3.20 / 3ffe:20::20. "host" answers 192.0.3.30,
// which the tests tell netd is one of the host's addresses.
var testAnswerTable = map[string][]string{
	"meta":       {"169.254.169.254", "fd00:ec2::254"},
	"loop":       {"127.0.0.1", "::1"},
	"slirp":      {"10.0.2.2", "10.0.2.3", "fd00::2", "fd00::3"},
	"lan":        {"192.168.1.1", "10.1.2.3", "172.16.0.1", "100.64.0.1", "fd12::1"},
	"doc":        {"192.0.2.30", "2001:db8::30"},
	"host":       {"192.0.3.30"},
	"mapped":     {"::ffff:169.254.169.254", "::ffff:192.0.3.30"},
	"nat64":      {"64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1"},
	"sixtofour":  {"2002:a9fe:a9fe::1", "2002:c000:31e::1"},
	"mixed":      {"169.254.169.254", "192.0.3.20", "127.0.0.1", "192.0.2.30"},
	"default":    {"192.0.3.20", "3ffe:20::20"},
	"cnametrick": nil, // see testAnswers
}

// testAnswers answers q from testAnswerTable. "cnametrick" answers a
// CNAME chain to the public host 192.0.3.21 plus an A record for a name
// not asked (stray.example, 192.0.3.31), which a resolver would ignore
// but must not open anything.
func testAnswers(q dnsmessage.Question) []dnsmessage.Resource {
	label, _, _ := strings.Cut(q.Name.String(), ".")
	hdr := func(name dnsmessage.Name, typ dnsmessage.Type, ttl uint32) dnsmessage.ResourceHeader {
		return dnsmessage.ResourceHeader{Name: name, Type: typ, Class: dnsmessage.ClassINET, TTL: ttl}
	}
	if label == "cnametrick" && q.Type == dnsmessage.TypeA {
		target := dnsmessage.MustNewName("edge.cdn.test.")
		return []dnsmessage.Resource{
			{Header: hdr(dnsmessage.MustNewName("stray.example."), dnsmessage.TypeA, 60), Body: &dnsmessage.AResource{A: [4]byte{192, 0, 3, 31}}},
			{Header: hdr(q.Name, dnsmessage.TypeCNAME, 60), Body: &dnsmessage.CNAMEResource{CNAME: target}},
			{Header: hdr(target, dnsmessage.TypeA, 0), Body: &dnsmessage.AResource{A: [4]byte{192, 0, 3, 21}}},
		}
	}
	addrs, ok := testAnswerTable[label]
	if !ok {
		addrs = testAnswerTable["default"]
	}
	var rrs []dnsmessage.Resource
	for _, s := range addrs {
		a := netip.MustParseAddr(s)
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			rrs = append(rrs, dnsmessage.Resource{Header: hdr(q.Name, dnsmessage.TypeA, 60), Body: &dnsmessage.AResource{A: a.As4()}})
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			rrs = append(rrs, dnsmessage.Resource{Header: hdr(q.Name, dnsmessage.TypeAAAA, 60), Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
		}
	}
	return rrs
}

// probeCmd runs one client action:
//
//	tcp ADDR            connect and read the server's "ok"
//	udp ADDR TEXT       send one datagram
//	dns SERVER NAME     ask SERVER directly for NAME's A record
//	markdns SERVER NAME the same from a socket carrying netd's upstream mark
//	resolve NAME        resolve A through /etc/resolv.conf (Go resolver)
//	resolve6 NAME       the same for AAAA
//	hold ADDR SECONDS   keep one echo connection busy for SECONDS
//	nftflush            flush the namespace's nftables ruleset
//	route               add a route
func probeCmd(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no probe")
	}
	switch args[0] {
	case "tcp":
		c, err := net.DialTimeout("tcp", args[1], 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "ok\n" {
			return fmt.Errorf("read %q: %v", line, err)
		}
		return nil
	case "udp":
		c, err := net.Dial("udp", args[1])
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte(args[2]))
		return err
	case "dns", "markdns":
		name, err := dnsmessage.NewName(args[2] + ".")
		if err != nil {
			return err
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		msg, _ := b.Finish()
		d := net.Dialer{}
		if args[0] == "markdns" {
			d.Control = func(_, _ string, rc syscall.RawConn) error {
				var serr error
				rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(netpolicy.UpstreamMark))
				})
				return serr
			}
		}
		c, err := d.Dial("udp", args[1])
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write(msg); err != nil {
			return err
		}
		buf := make([]byte, 2048)
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		var m dnsmessage.Message
		if err := m.Unpack(buf[:n]); err != nil {
			return err
		}
		fmt.Println("rcode", m.Header.RCode, "answers", len(m.Answers))
		return nil
	case "resolve", "resolve6":
		r := &net.Resolver{PreferGo: true}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		family := "ip4"
		if args[0] == "resolve6" {
			family = "ip6"
		}
		addrs, err := r.LookupNetIP(ctx, family, args[1])
		if err != nil {
			return err
		}
		for _, a := range addrs {
			fmt.Println("addr", a)
		}
		return nil
	case "hold":
		c, err := net.DialTimeout("tcp", args[1], 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		var secs int
		fmt.Sscan(args[2], &secs)
		r := bufio.NewReader(c)
		fmt.Println("connected")
		deadline := time.Now().Add(time.Duration(secs) * time.Second)
		for i := 0; time.Now().Before(deadline); i++ {
			c.SetDeadline(time.Now().Add(3 * time.Second))
			want := fmt.Sprintf("ping %d\n", i)
			if _, err := io.WriteString(c, want); err != nil {
				return fmt.Errorf("write %d: %w", i, err)
			}
			got, err := r.ReadString('\n')
			if err != nil || got != want {
				return fmt.Errorf("echo %d: %q %v", i, got, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		return nil
	case "nftflush":
		c, err := nftables.New()
		if err != nil {
			return err
		}
		c.FlushRuleset()
		return c.Flush()
	case "route":
		links, err := netlink.LinkList()
		if err != nil {
			return fmt.Errorf("list links: %w", err)
		}
		var idx int
		for _, l := range links {
			if l.Attrs().Name != "lo" {
				idx = l.Attrs().Index
			}
		}
		_, dst, _ := net.ParseCIDR("203.0.113.0/24")
		return netlink.RouteAdd(&netlink.Route{Dst: dst, LinkIndex: idx, Scope: netlink.SCOPE_LINK})
	}
	return fmt.Errorf("unknown probe %q", args[0])
}
