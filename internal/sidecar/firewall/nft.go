// Package firewall installs a sandbox's egress policy (netpolicy's
// Ruleset) in its network namespace as one nftables inet table, and
// updates its sets, in netlink batches. Only the network sidecar links it:
// nftables stays out of the CLI, the coordinator and lazaret-kube.
package firewall

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// Conn is the netlink connection netd installs rules with. It is an
// *nftables.Conn; the interface keeps the callers honest about what they use.
type Conn = nftables.Conn

// Dial opens a lasting nftables netlink connection in the current network
// namespace.
func Dial() (*Conn, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("nftables netlink: %w", err)
	}
	return c, nil
}

func table() *nftables.Table {
	return &nftables.Table{Name: netpolicy.TableName, Family: nftables.TableFamilyINet}
}

func nftSet(s netpolicy.Set) *nftables.Set {
	kt := nftables.TypeIPAddr
	if s.Family == netpolicy.IPv6 {
		kt = nftables.TypeIP6Addr
	}
	ns := &nftables.Set{
		Table:      table(),
		Name:       s.Name,
		KeyType:    kt,
		Interval:   s.Interval,
		HasTimeout: s.Timeout,
	}
	if s.Timeout {
		// The resolver fills these from the agent's lookups: bound them so
		// a flood of names under a wildcard cannot grow kernel memory
		// without limit (a full set refuses the add; netd answers SERVFAIL).
		ns.Size = netpolicy.MaxResolved
	}
	return ns
}

// setByName returns the nftables handle of one of the table's sets.
func setByName(name string) *nftables.Set {
	for _, s := range netpolicy.Build(netpolicy.Policy{}, nil).Sets {
		if s.Name == name {
			return nftSet(s)
		}
	}
	panic("netpolicy: unknown set " + name)
}

// intervalElements encodes prefixes as the kernel's interval elements: a
// start key and, unless the range runs to the end of the address space, an
// interval-end key one past its last address.
func intervalElements(ps []netip.Prefix) []nftables.SetElement {
	var els []nftables.SetElement
	for _, r := range netpolicy.MergeRanges(ps) {
		els = append(els, nftables.SetElement{Key: r.First.AsSlice()})
		if end := r.Last.Next(); end.IsValid() {
			els = append(els, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return els
}

// Install replaces the namespace's lazaret table with rs in ONE netlink
// transaction: the table is created (if missing), deleted and re-created
// with its chain, sets and rules, so there is never a moment with a partial
// ruleset, and on any error the kernel keeps what it had.
func Install(c *Conn, rs netpolicy.Ruleset) error {
	t := table()
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	policy := nftables.ChainPolicyDrop
	prio := nftables.ChainPriority(int32(rs.Priority))
	ch := c.AddChain(&nftables.Chain{
		Name:     rs.Chain,
		Table:    t,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookOutput,
		Priority: &prio,
		Policy:   &policy,
	})
	for _, s := range rs.Sets {
		var els []nftables.SetElement
		if s.Interval {
			els = intervalElements(s.Elements)
		} else {
			for _, e := range s.Elements {
				els = append(els, nftables.SetElement{Key: e.Addr().AsSlice()})
			}
		}
		if err := c.AddSet(nftSet(s), els); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
	}
	for _, r := range rs.Rules {
		exprs, err := ruleExprs(r)
		if err != nil {
			return fmt.Errorf("rule %q: %w", r.Comment, err)
		}
		c.AddRule(&nftables.Rule{
			Table:    t,
			Chain:    ch,
			Exprs:    exprs,
			UserData: userdata.AppendString(nil, userdata.TypeComment, r.Comment),
		})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install nftables ruleset: %w", err)
	}
	return nil
}

// ReplaceAllow swaps the contents of allow4 and allow6 in one transaction.
// The table, chain and rules are untouched, so conntrack state (and every
// established flow) is kept.
func ReplaceAllow(c *Conn, v4, v6 []netip.Prefix) error {
	return replaceIntervalSets(c, "allow", netpolicy.SetAllow4, v4, netpolicy.SetAllow6, v6)
}

// replaceIntervalSets flushes and refills two interval sets (an IPv4 and
// an IPv6 one) in one transaction.
func replaceIntervalSets(c *Conn, what, name4 string, v4 []netip.Prefix, name6 string, v6 []netip.Prefix) error {
	for _, x := range []struct {
		name string
		ps   []netip.Prefix
	}{{name4, v4}, {name6, v6}} {
		s := setByName(x.name)
		c.FlushSet(s)
		if els := intervalElements(x.ps); len(els) > 0 {
			if err := c.SetAddElements(s, els); err != nil {
				return fmt.Errorf("set %s: %w", x.name, err)
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("update %s sets: %w", what, err)
	}
	return nil
}

// ReplaceHost replaces the host4 and host6 sets with the host's addresses
// (netpolicy.HostSets), in one transaction.
func ReplaceHost(c *Conn, host []netip.Addr) error {
	v4, v6 := netpolicy.HostSets(host)
	return replaceIntervalSets(c, "host", netpolicy.SetHost4, v4, netpolicy.SetHost6, v6)
}

// Resolved is one address learned from an allowed name.
type Resolved struct {
	Addr netip.Addr
	TTL  time.Duration
	// Refresh is set when the address may already be in the set: it is
	// deleted and re-added so its timeout is renewed.
	Refresh bool
}

// AddResolved adds addresses to the dns4/dns6 sets with per-element
// timeouts, in one transaction.
func AddResolved(c *Conn, rs []Resolved) error {
	if len(rs) == 0 {
		return nil
	}
	for _, r := range rs {
		name := netpolicy.SetDNS4
		a := r.Addr.Unmap()
		if a.Is6() {
			name = netpolicy.SetDNS6
		}
		s := setByName(name)
		el := []nftables.SetElement{{Key: a.AsSlice(), Timeout: r.TTL}}
		if r.Refresh {
			if err := c.SetDeleteElements(s, []nftables.SetElement{{Key: a.AsSlice()}}); err != nil {
				return err
			}
		}
		if err := c.SetAddElements(s, el); err != nil {
			return err
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("add resolved addresses: %w", err)
	}
	return nil
}

// RemoveResolved deletes addresses from the dns4/dns6 sets, one
// transaction each: an address may already have timed out, and a missing
// element would fail a shared batch. It returns the first error other than
// a missing element.
func RemoveResolved(c *Conn, addrs []netip.Addr) error {
	var first error
	for _, a := range addrs {
		a = a.Unmap()
		name := netpolicy.SetDNS4
		if a.Is6() {
			name = netpolicy.SetDNS6
		}
		if err := c.SetDeleteElements(setByName(name), []nftables.SetElement{{Key: a.AsSlice()}}); err != nil {
			return err
		}
		if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) && first == nil {
			first = fmt.Errorf("remove %s from %s: %w", a, name, err)
		}
	}
	return first
}

// Counters returns the packet counts of the counted rules by comment.
func Counters(c *Conn) (map[string]uint64, error) {
	t := table()
	rules, err := c.GetRules(t, &nftables.Chain{Name: netpolicy.ChainName, Table: t})
	if err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	out := map[string]uint64{}
	for _, r := range rules {
		comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		for _, e := range r.Exprs {
			if ctr, ok := e.(*expr.Counter); ok {
				out[comment] += ctr.Packets
			}
		}
	}
	return out, nil
}

// ruleExprs translates one model rule into nftables expressions. Every
// match loads into register 1 and compares; the family check comes first
// so a payload load never reads the wrong header.
func ruleExprs(r netpolicy.Rule) ([]expr.Any, error) {
	var ex []expr.Any
	cmp := func(data []byte) {
		ex = append(ex, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data})
	}
	if r.Family != netpolicy.AnyFamily {
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1})
		if r.Family == netpolicy.IPv4 {
			cmp([]byte{unix.NFPROTO_IPV4})
		} else {
			cmp([]byte{unix.NFPROTO_IPV6})
		}
	}
	if r.OifLo {
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1})
		name := make([]byte, unix.IFNAMSIZ)
		copy(name, "lo")
		cmp(name)
	}
	if len(r.CtState) > 0 {
		ct, err := ctStateExprs(r.CtState)
		if err != nil {
			return nil, err
		}
		ex = append(ex, ct...)
	}
	if r.Mark != 0 {
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyMARK, Register: 1})
		cmp(binaryutil.NativeEndian.PutUint32(r.Mark))
	}
	if r.L4 != 0 {
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1})
		cmp([]byte{r.L4})
	}
	if r.ICMPv6ND {
		if r.L4 != netpolicy.ProtoICMPv6 || r.Family != netpolicy.IPv6 {
			return nil, fmt.Errorf("neighbour discovery needs family ipv6 and l4 icmpv6")
		}
		ex = append(ex,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{133}, ToData: []byte{136}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 7, Len: 1})
		cmp([]byte{255})
	}
	if r.Dport != 0 {
		if r.L4 != netpolicy.ProtoTCP && r.L4 != netpolicy.ProtoUDP {
			return nil, fmt.Errorf("dport needs tcp or udp")
		}
		port := make([]byte, 2)
		binary.BigEndian.PutUint16(port, r.Dport)
		ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
		cmp(port)
	}
	if r.DaddrSet != "" {
		switch r.Family {
		case netpolicy.IPv4:
			ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4})
		case netpolicy.IPv6:
			ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16})
		default:
			return nil, fmt.Errorf("a set lookup needs a family")
		}
		ex = append(ex, &expr.Lookup{SourceRegister: 1, SetName: r.DaddrSet})
	}
	return actionExprs(ex, r)
}

// ctStateExprs matches a connection in any of states.
func ctStateExprs(states []string) ([]expr.Any, error) {
	var mask uint32
	for _, s := range states {
		switch s {
		case "established":
			mask |= expr.CtStateBitESTABLISHED
		case "related":
			mask |= expr.CtStateBitRELATED
		case "invalid":
			mask |= expr.CtStateBitINVALID
		case "new":
			mask |= expr.CtStateBitNEW
		default:
			return nil, fmt.Errorf("unknown ct state %q", s)
		}
	}
	return []expr.Any{
		&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}, nil
}

// actionExprs appends to ex what r does with a matching packet: count it,
// log it, and its verdict.
func actionExprs(ex []expr.Any, r netpolicy.Rule) ([]expr.Any, error) {
	if r.Counter {
		ex = append(ex, &expr.Counter{})
	}
	if r.LogGroup != 0 {
		ex = append(ex, &expr.Log{
			Key:     1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_SNAPLEN,
			Group:   r.LogGroup,
			Snaplen: netpolicy.DenyLogSnaplen,
		})
	}
	switch r.Verdict {
	case netpolicy.Accept:
		ex = append(ex, &expr.Verdict{Kind: expr.VerdictAccept})
	case netpolicy.Drop:
		ex = append(ex, &expr.Verdict{Kind: expr.VerdictDrop})
	case netpolicy.Reject:
		ex = append(ex, &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED})
	default:
		return nil, fmt.Errorf("unknown verdict %q", r.Verdict)
	}
	return ex, nil
}
