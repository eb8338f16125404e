package netd

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nfnetlink_log constants (linux/netfilter/nfnetlink_log.h); x/sys/unix
// does not carry them.
const (
	nfnlSubsysULOG   = 4
	nfulnlMsgPacket  = 0
	nfulnlMsgConfig  = 1
	nfulaCfgCmd      = 1
	nfulaCfgMode     = 2
	nfulaCfgTimeout  = 3
	nfulaCfgQThresh  = 4
	nfulnlCfgCmdBind = 1
	nfulnlCopyPacket = 2
	nfulaPayload     = 9
	nfnlHeaderLen    = 4
	nfnetlinkV0      = 0
)

// nflogReader receives the packets the ruleset's deny rules copy to an
// nflog group: one netlink socket, bound to the group in this network
// namespace (needs CAP_NET_ADMIN in the namespace's user namespace, which
// the sidecar has). Reading them is how a denial becomes visible per
// destination without any kernel log.
type nflogReader struct {
	conn *netlink.Conn
}

func nfgen(family uint8, group uint16) []byte {
	b := []byte{family, nfnetlinkV0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], group)
	return b
}

// openNflog binds group with packet copy mode (copyRange bytes).
func openNflog(group uint16, copyRange uint32) (*nflogReader, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("nflog: netlink: %w", err)
	}
	send := func(attrs []netlink.Attribute) error {
		ab, err := netlink.MarshalAttributes(attrs)
		if err != nil {
			return err
		}
		_, err = c.Execute(netlink.Message{
			Header: netlink.Header{
				Type:  netlink.HeaderType(nfnlSubsysULOG<<8 | nfulnlMsgConfig),
				Flags: netlink.Request | netlink.Acknowledge,
			},
			Data: append(nfgen(unix.AF_UNSPEC, group), ab...),
		})
		return err
	}
	if err := send([]netlink.Attribute{{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog: bind group %d: %w", group, err)
	}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, copyRange)
	mode[4] = nfulnlCopyPacket
	if err := send([]netlink.Attribute{{Type: nfulaCfgMode, Data: mode}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog: copy mode: %w", err)
	}
	// Deliver each packet at once rather than batching up to a second, so
	// `lazaret net status` right after a failure already shows it.
	one := binary.BigEndian.AppendUint32(nil, 1)
	if err := send([]netlink.Attribute{{Type: nfulaCfgQThresh, Data: one}, {Type: nfulaCfgTimeout, Data: binary.BigEndian.AppendUint32(nil, 0)}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog: queue threshold: %w", err)
	}
	return &nflogReader{conn: c}, nil
}

// run calls fn with the payload (the IP packet) of each logged packet until
// the socket is closed.
func (r *nflogReader) run(fn func(pkt []byte)) error {
	for {
		msgs, err := r.conn.Receive()
		if errors.Is(err, unix.ENOBUFS) {
			// A burst overflowed the socket buffer: those denials are
			// lost (the rule counters still have them); keep reading.
			continue
		}
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(nfnlSubsysULOG<<8|nfulnlMsgPacket) || len(m.Data) < nfnlHeaderLen {
				continue
			}
			ad, err := netlink.NewAttributeDecoder(m.Data[nfnlHeaderLen:])
			if err != nil {
				continue
			}
			for ad.Next() {
				if ad.Type() == nfulaPayload {
					fn(ad.Bytes())
				}
			}
		}
	}
}

func (r *nflogReader) close() error { return r.conn.Close() }
