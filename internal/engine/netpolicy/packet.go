package netpolicy

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Dest is where a packet was going: what a denial is counted by.
type Dest struct {
	Proto uint8
	Addr  netip.Addr
	Port  uint16 // 0 for protocols without ports
}

func (d Dest) String() string {
	name := map[uint8]string{ProtoTCP: "tcp", ProtoUDP: "udp", 1: "icmp", ProtoICMPv6: "icmpv6"}[d.Proto]
	if name == "" {
		name = fmt.Sprintf("proto-%d", d.Proto)
	}
	if d.Port == 0 && d.Proto != ProtoTCP && d.Proto != ProtoUDP {
		return name + " " + d.Addr.String()
	}
	return name + " " + netip.AddrPortFrom(d.Addr, d.Port).String()
}

// ParsePacketDest reads the destination of a raw IPv4 or IPv6 packet (as
// nflog and TUN devices deliver them). Truncated packets give ok=false; a
// packet without a full transport header gives port 0.
func ParsePacketDest(b []byte) (d Dest, ok bool) {
	if len(b) < 1 {
		return d, false
	}
	var l4 []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return d, false
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl {
			return d, false
		}
		d.Proto = b[9]
		d.Addr = netip.AddrFrom4([4]byte(b[16:20]))
		if binary.BigEndian.Uint16(b[6:8])&0x1fff == 0 { // first fragment only
			l4 = b[ihl:]
		}
	case 6:
		if len(b) < 40 {
			return d, false
		}
		d.Proto = b[6]
		d.Addr = netip.AddrFrom16([16]byte(b[24:40]))
		l4 = b[40:]
	default:
		return d, false
	}
	if (d.Proto == ProtoTCP || d.Proto == ProtoUDP) && len(l4) >= 4 {
		d.Port = binary.BigEndian.Uint16(l4[2:4])
	}
	return d, true
}
