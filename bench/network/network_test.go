//go:build bench

// Package network benchmarks the Network Sidecar: TCP throughput and
// connect latency to an allowed test host from inside the sandbox (runsc
// --network=host in the netd namespace, nftables policy installed) against
// a runc container without any policy, and a runsc agent without policy to
// separate the cost of gVisor from the cost of the ruleset, all in the same
// run; and the median latency of a DNS lookup of an allowed name through
// netd (which forwards it upstream and adds the answer to the allow set)
// against the same query sent straight to the upstream. Prints a markdown
// table for docs/PERFORMANCE.md. Run by `make bench` (scripts/bench).
package network

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sidecar"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

const (
	helperEnv  = "LAZARET_NETBENCH"
	helperPath = "/run/netbench"
	agentImage = "localhost/lazaret-default:latest"
	netdImage  = "localhost/lazaret-netd:bench"
	sendMB     = 256
	connects   = 300
	lookups    = 200
)

// init turns this binary into the test host or the client when run inside
// a container (as root, where the test framework is not wanted).
func init() {
	switch os.Getenv(helperEnv) {
	case "serve":
		os.Exit(serve())
	case "client":
		os.Exit(client(os.Args[1:]))
	}
}

func serve() int {
	// :5001 sinks everything and answers the byte count; :5002 accepts
	// and closes; 192.0.2.53:53 answers every A query with 192.0.3.20 (a
	// public-looking address, which netd adds to its set as in production;
	// nothing is sent to it).
	sink, err := net.Listen("tcp", ":5001")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	go func() {
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				n, _ := io.Copy(io.Discard, c)
				fmt.Fprintf(c, "%d\n", n)
			}()
		}
	}()
	acc, err := net.Listen("tcp", ":5002")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	go func() {
		for {
			c, err := acc.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	fmt.Println("ready")
	var dns net.PacketConn
	for {
		if dns, err = net.ListenPacket("udp", "192.0.2.53:53"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("dns-ready")
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
		m.Header.Response, m.Additionals = true, nil
		if q.Type == dnsmessage.TypeA {
			m.Answers = []dnsmessage.Resource{{
				Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
				Body:   &dnsmessage.AResource{A: [4]byte{192, 0, 3, 20}},
			}}
		}
		if b, err := m.Pack(); err == nil {
			dns.WriteTo(b, from)
		}
	}
}

// result is what the client prints.
type result struct {
	MBps      float64 `json:"mbps"`
	ConnectUS float64 `json:"connect_us"` // median
	DNSUS     float64 `json:"dns_us"`     // median
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// client measures against ADDR; with DNSSERVER it also times lookups of
// bench.allowed.test there.
func client(args []string) int {
	addr, dnsServer := args[0], args[1]
	var r result
	buf := make([]byte, 1<<20)
	c, err := net.Dial("tcp", addr+":5001")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	start := time.Now()
	for range sendMB {
		if _, err := c.Write(buf); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	c.(*net.TCPConn).CloseWrite()
	io.ReadAll(c)
	r.MBps = sendMB / time.Since(start).Seconds()
	c.Close()
	var lat []float64
	for range connects {
		t0 := time.Now()
		c, err := net.Dial("tcp", addr+":5002")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		lat = append(lat, float64(time.Since(t0).Microseconds()))
		c.Close()
	}
	r.ConnectUS = median(lat)
	lat = lat[:0]
	name := dnsmessage.MustNewName("bench.allowed.test.")
	for i := range lookups {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: uint16(i), RecursionDesired: true})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		msg, _ := b.Finish()
		t0 := time.Now()
		u, err := net.Dial("udp", dnsServer+":53")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		u.SetDeadline(time.Now().Add(3 * time.Second))
		u.Write(msg)
		resp := make([]byte, 1500)
		n, err := u.Read(resp)
		u.Close()
		var m dnsmessage.Message
		if err != nil || m.Unpack(resp[:n]) != nil || len(m.Answers) == 0 {
			fmt.Println("lookup failed", err)
			return 1
		}
		lat = append(lat, float64(time.Since(t0).Microseconds()))
	}
	r.DNSUS = median(lat)
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

type fixture struct {
	b      *testing.B
	helper string
	runsc  string
	sfx    string
}

func (f *fixture) podman(args ...string) string {
	f.b.Helper()
	out, err := exec.Command("podman", args...).CombinedOutput()
	if err != nil {
		f.b.Fatalf("podman %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (f *fixture) run(name string, args ...string) {
	f.b.Helper()
	all := append([]string{"run", "-d", "--replace", "--name", name,
		"--mount", "type=bind,source=" + f.helper + ",destination=" + helperPath + ",readonly=true"}, args...)
	f.podman(all...)
	f.b.Cleanup(func() { exec.Command("podman", "rm", "-f", "-t", "0", name).Run() })
}

func (f *fixture) waitLog(name, what string) {
	f.b.Helper()
	for range 400 {
		out, _ := exec.Command("podman", "logs", name).CombinedOutput()
		if strings.Contains(string(out), what) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.b.Fatalf("%s: no %q", name, what)
}

// wire joins the namespace of client to a new test host by a veth pair.
func (f *fixture) wire(client string) string {
	f.b.Helper()
	server := client + "-srv"
	f.run(server, "--runtime", "runc", "--network", "none", "--env", helperEnv+"=serve", agentImage, helperPath)
	f.waitLog(server, "ready")
	cp := f.podman("inspect", "--format", "{{.State.Pid}}", client)
	sp := f.podman("inspect", "--format", "{{.State.Pid}}", server)
	c, s := "nsenter -t "+cp+" -n ", "nsenter -t "+sp+" -n "
	script := strings.Join([]string{
		c + "ip link add lzb0 type veth peer name lzb1 netns " + sp,
		c + "ip addr add 192.0.2.1/24 dev lzb0", c + "ip link set lzb0 up",
		s + "ip addr add 192.0.2.10/24 dev lzb1", s + "ip addr add 192.0.2.53/24 dev lzb1", s + "ip link set lzb1 up",
	}, "\n")
	if out, err := exec.Command("podman", "unshare", "sh", "-ec", script).CombinedOutput(); err != nil {
		f.b.Fatalf("wire: %v %s", err, out)
	}
	f.waitLog(server, "dns-ready")
	return server
}

func (f *fixture) measure(container, dnsServer string) result {
	f.b.Helper()
	out := f.podman("exec", "--env", helperEnv+"=client", container, helperPath, "192.0.2.10", dnsServer)
	var r result
	if err := json.Unmarshal([]byte(out[strings.LastIndexByte(out, '\n')+1:]), &r); err != nil {
		f.b.Fatalf("client output %q: %v", out, err)
	}
	return r
}

func BenchmarkNetwork(b *testing.B) {
	exe, _ := os.Executable()
	runsc, err := locate.Find(locate.Runsc)
	if err != nil {
		b.Fatal(err)
	}
	f := &fixture{b: b, helper: exe, runsc: runsc, sfx: strconv.Itoa(os.Getpid())}
	ctx := context.Background()
	pc := &podman.Client{}
	netdBin := filepath.Join(os.Getenv("LAZARET_BIN"), "lazaret-netd")
	fi, err := os.Stat(netdBin)
	if err != nil {
		b.Fatal(err)
	}
	// The release build (make build: -s -w -trimpath) must fit the budget
	// (the same as cmd/lazaret-netd's deps_test: 9 MB since the secret
	// injector brought crypto/tls and net/http's HTTP/2 in).
	const budget = 9 << 20
	if fi.Size() > budget {
		b.Errorf("lazaret-netd is %d bytes, budget %d", fi.Size(), budget)
	}
	t0 := time.Now()
	if err := netdimage.BuildImage(ctx, pc, netdBin, netdImage); err != nil {
		b.Fatal(err)
	}
	imageBuild := time.Since(t0)
	b.Cleanup(func() { exec.Command("podman", "rmi", "-f", netdImage).Run() })
	ws := b.TempDir()
	rt, err := domain.RuntimeDir()
	if err != nil {
		b.Fatal(err)
	}
	a, err := domain.New("default", ws, b.TempDir(), rt, "")
	if err != nil {
		b.Fatal(err)
	}
	pol, _ := netpolicy.FromConfig([]netip.Prefix{netip.MustParsePrefix("192.0.2.0/28")}, []string{"*.allowed.test"})
	comp := sidecar.New(sidecar.Options{Anchor: a, Policy: pol, Podman: pc, Image: netdImage, Upstreams: []string{"192.0.2.53"}})
	agent := "lzb-net-agent-" + f.sfx
	spec := &podman.ContainerSpec{Name: agent, Image: agentImage}
	t1 := time.Now()
	if err := comp.Prepare(ctx, spec); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { comp.Close(context.Background()) })
	if err := comp.Started(ctx, agent); err != nil {
		b.Fatal(err)
	}
	sidecarStart := time.Since(t1)
	f.wire(a.Sidecar())
	runscArgs := []string{"--runtime", runsc, "--runtime-flag", "ignore-cgroups", "--runtime-flag", "network=host"}
	f.run(agent, append(runscArgs, "--network", spec.Network, "--dns", spec.DNS[0], agentImage, "sleep", "900")...)

	plain := "lzb-net-plain-" + f.sfx
	f.run(plain, "--runtime", "runc", "--network", sidecar.DefaultUplink, agentImage, "sleep", "900")
	f.wire(plain)
	plainRunsc := "lzb-net-plainrunsc-" + f.sfx
	f.run(plainRunsc, append(runscArgs, "--network", "container:"+plain, agentImage, "sleep", "900")...)

	rounds := 5
	res := map[string][]result{}
	b.ResetTimer()
	for range rounds { // interleaved, so machine load hits all alike
		res["sandbox"] = append(res["sandbox"], f.measure(agent, "127.0.0.1"))
		res["runc"] = append(res["runc"], f.measure(plain, "192.0.2.53"))
		res["runsc"] = append(res["runsc"], f.measure(plainRunsc, "192.0.2.53"))
	}
	b.StopTimer()
	med := func(k string, get func(result) float64) float64 {
		var xs []float64
		for _, r := range res[k] {
			xs = append(xs, get(r))
		}
		return median(xs)
	}
	mbps := func(r result) float64 { return r.MBps }
	conn := func(r result) float64 { return r.ConnectUS }
	dns := func(r result) float64 { return r.DNSUS }
	fmt.Printf("\nTCP to an allowed test host over a veth, %d MB one stream, %d sequential connects, %d lookups; median of %d interleaved rounds, %s\n\n",
		sendMB, connects, lookups, rounds, time.Now().UTC().Format("2006-01-02"))
	fmt.Printf("lazaret-netd: %.1f MB (budget 9 MB); sidecar image build (FROM scratch, --network none): %.1f s; sidecar start until the ruleset is reported installed: %.2f s\n\n",
		float64(fi.Size())/(1<<20), imageBuild.Seconds(), sidecarStart.Seconds())
	fmt.Println("| client | throughput MB/s | ratio | connect µs (median) | ratio | DNS lookup µs (median) | ratio |")
	fmt.Println("|---|---|---|---|---|---|---|")
	base := []float64{med("runc", mbps), med("runc", conn), med("runc", dns)}
	for _, row := range []struct{ k, label, dnsLabel string }{
		{"runc", "runc container, no policy (baseline)", "straight to upstream"},
		{"runsc", "runsc --network=host, no policy", "straight to upstream"},
		{"sandbox", "sandbox: runsc --network=host + netd policy", "through netd"},
	} {
		m, c, d := med(row.k, mbps), med(row.k, conn), med(row.k, dns)
		fmt.Printf("| %s | %.0f | %.2f | %.0f | %.2f | %.0f (%s) | %.2f |\n", row.label, m, m/base[0], c, c/base[1], d, row.dnsLabel, d/base[2])
	}
}
