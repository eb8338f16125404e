package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi/netdtest"
)

func TestPrintNetStatus(t *testing.T) {
	st := &netdapi.Status{
		Applied:   true,
		Upstreams: []string{"10.0.2.3:53"},
		Policy: netpolicy.Policy{
			AllowEgress:  []netpolicy.CIDR{{Prefix: netip.MustParsePrefix("140.82.112.0/20")}, {Prefix: netip.MustParsePrefix("10.9.0.0/16"), Expires: time.Now().Add(10 * time.Minute)}},
			AllowDomains: []netpolicy.Domain{{Pattern: "registry.npmjs.org"}},
		},
		Resolved:  []netdapi.Resolved{{Name: "registry.npmjs.org", Addr: "104.16.1.34", Expires: time.Now().Add(time.Minute)}},
		Denials:   []netdapi.Denial{{Dest: "tcp 1.2.3.4:443", Count: 3, Last: time.Now()}, {Dest: "dns evil.example", Count: 1, Last: time.Now()}},
		Counters:  map[string]uint64{"deny default": 3, "deny metadata ipv4": 2, "deny other dns udp": 1, "invalid": 9},
		DenialLog: "nflog",
	}
	var b bytes.Buffer
	printNetStatus(&b, st)
	out := b.String()
	for _, want := range []string{
		"installed (default deny)", "10.0.2.3:53",
		"140.82.112.0/20", "permanent", "10.9.0.0/16", "expires in ",
		"registry.npmjs.org", "104.16.1.34",
		"denied packets:", "6 (metadata 2, dns 1)",
		"recent denials (nflog)", "tcp 1.2.3.4:443", "dns evil.example",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// netEnv is an auditEnv whose domain has a stand-in netd on its socket
// (serve) or nothing running.
func netEnv(t *testing.T, body string) *auditEnv {
	e := newAuditEnv(t)
	data, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, append(data, body...), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *auditEnv) netdSocket(profile string) string {
	out, _, code := e.run("domain", profile, "--json")
	if code != 0 {
		e.t.Fatalf("domain: %s", out)
	}
	var d domainJSON
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		e.t.Fatal(err)
	}
	return d.Resources["netd_socket"]
}

// TestNetAllowBreadth: `net allow` applies config check's breadth rule and
// sends (and says) the network it really opens: 8.8.8.8/0 was allowed
// and shown as itself while netd opened 0.0.0.0/0. Each over-broad prefix
// is refused without --yes (exit 2, before reaching netd) and named as it
// opens; a narrow one with host bits set is allowed as its network.
func TestNetAllowBreadth(t *testing.T) {
	e := netEnv(t, "")
	srv, _ := netdtest.Serve(t, e.netdSocket("default"))
	for _, tc := range []struct{ arg, opens string }{
		{"8.8.8.8/0", "0.0.0.0/0"}, {"0.0.0.0/0", "0.0.0.0/0"}, {"::/0", "::/0"}, {"2001:db8::1/0", "::/0"},
		{"10.0.0.0/1", "0.0.0.0/1"}, {"200.1.2.3/7", "200.0.0.0/7"}, {"2001:db8::/15", "2000::/15"},
	} {
		_, errOut, code := e.run("net", "allow", tc.arg)
		if code != exitUsage || !strings.Contains(errOut, tc.opens+" allows ") || !strings.Contains(errOut, "--yes "+tc.opens) {
			t.Errorf("net allow %s: exit %d, %s", tc.arg, code, errOut)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("refused prefixes reached netd: %+v", srv.Requests())
	}
	out, errOut, code := e.run("net", "allow", "--yes", "8.8.8.8/0")
	if code != 0 || !strings.Contains(out, "allowed 0.0.0.0/0 (8.8.8.8/0 has host bits set; every IPv4 destination)") {
		t.Fatalf("--yes: exit %d, %s%s", code, out, errOut)
	}
	out, _, code = e.run("net", "allow", "10.1.2.3/8")
	if code != 0 || !strings.HasPrefix(out, "allowed 10.0.0.0/8 (10.1.2.3/8 has host bits set; 1/256 of all IPv4 addresses)") {
		t.Fatalf("10.1.2.3/8: exit %d, %s", code, out)
	}
	out, _, code = e.run("net", "allow", "192.0.3.20")
	if code != 0 || !strings.HasPrefix(out, "allowed 192.0.3.20/32 until") {
		t.Fatalf("address: exit %d, %s", code, out)
	}
	var sent []string
	for _, r := range srv.Requests() {
		sent = append(sent, r.Target)
	}
	if strings.Join(sent, " ") != "0.0.0.0/0 10.0.0.0/8 192.0.3.20/32" {
		t.Fatalf("netd was asked for %v", sent)
	}
	// config check warns about the same entries, naming what they open.
	_ = os.WriteFile(e.config, []byte(fmt.Sprintf("data_root = %q\n[network]\nallow_egress = [\"8.8.8.8/0\", \"10.0.0.0/1\", \"::/0\", \"140.82.112.0/20\"]\n", filepath.Join(filepath.Dir(e.config), "data"))), 0o600)
	_, errOut, code = e.run("config", "check")
	for _, want := range []string{`"8.8.8.8/0" has host bits set: it opens 0.0.0.0/0`, "0.0.0.0/0 allows every IPv4 destination", "0.0.0.0/1 allows 1/2 of all IPv4 addresses", "::/0 allows every IPv6 destination"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("config check lacks %q: exit %d\n%s", want, code, errOut)
		}
	}
	if strings.Contains(errOut, "140.82.112.0/20 allows") {
		t.Errorf("a narrow prefix warned about:\n%s", errOut)
	}
}

// TestNetStatusNotRunning: with nothing running, `net status` shows the
// configured policy (it was only an error).
func TestNetStatusNotRunning(t *testing.T) {
	e := netEnv(t, "[profiles.claude]\nimage = \"x:1\"\nallow_egress = [\"140.82.112.0/20\"]\nallow_domains = [\"api.anthropic.com\"]\n")
	out, errOut, code := e.run("net", "status", "claude")
	if code != 0 || !strings.Contains(out, "not running: profile claude") || !strings.Contains(out, "configured policy") ||
		!strings.Contains(out, "140.82.112.0/20") || !strings.Contains(out, "api.anthropic.com") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = e.run("net", "status", "claude", "--json")
	if code != 0 || !strings.Contains(out, `"running": false`) || !strings.Contains(out, `"140.82.112.0/20"`) {
		t.Fatalf("json: exit %d\n%s", code, out)
	}
}

// TestNetReloadSaysWhatItKept: a reload replaces the allowlist with the
// configuration's, and names what netd kept (entries allowed with --for,
// until they expire) instead of claiming it replaced everything.
func TestNetReloadSaysWhatItKept(t *testing.T) {
	conf := netpolicy.Policy{AllowEgress: []netpolicy.CIDR{{Prefix: netip.MustParsePrefix("140.82.112.0/20")}}}
	live := conf
	live.AllowEgress = append(live.AllowEgress, netpolicy.CIDR{Prefix: netip.MustParsePrefix("10.9.0.0/16"), Expires: time.Now().Add(10 * time.Minute)})
	live.AllowDomains = []netpolicy.Domain{{Pattern: "registry.npmjs.org", Expires: time.Now().Add(time.Minute)}}
	kept := keptEntries(conf, live)
	if len(kept) != 2 || !strings.HasPrefix(kept[0], "10.9.0.0/16 (expires in ") || !strings.HasPrefix(kept[1], "registry.npmjs.org (expires in ") {
		t.Fatalf("kept %q", kept)
	}
	if k := keptEntries(conf, conf); len(k) != 0 {
		t.Fatalf("kept %q of the configuration itself", k)
	}
}
