package firewall

import (
	"net/netip"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

func TestRuleExprsAll(t *testing.T) {
	for _, r := range netpolicy.Build(netpolicy.Policy{}, nil).Rules {
		if _, err := ruleExprs(r); err != nil {
			t.Errorf("%s: %v", r.Comment, err)
		}
	}
}

func TestIntervalElements(t *testing.T) {
	pp := func(s string) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(s)} }
	// The whole address space has no interval end (it would overflow).
	if els := intervalElements(pp("0.0.0.0/0")); len(els) != 1 || els[0].IntervalEnd {
		t.Errorf("0.0.0.0/0 elements: %+v", els)
	}
	if els := intervalElements(pp("10.0.0.0/8")); len(els) != 2 || !els[1].IntervalEnd || netip.AddrFrom4([4]byte(els[1].Key)) != netip.MustParseAddr("11.0.0.0") {
		t.Errorf("10.0.0.0/8 elements: %+v", els)
	}
}
