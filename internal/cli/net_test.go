package cli

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/netdapi"
	"github.com/lazaret-dev/lazaret/internal/netpolicy"
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
