package netd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// Limits of the query names netd forwards. A name that could carry data
// out through the upstream resolver (DNS tunnelling) is never forwarded,
// even under an allowed "*." pattern.
const (
	maxNameLen = 253
	maxLabel   = 63
	// A label at least entropyMinLen long looks like encoded data rather
	// than a host name when its characters carry more than entropyMaxBits
	// bits each (base32/base64 of random bytes: 4.2–5), or more than
	// entropyDigitBits with at least a quarter digits (hex: about 3.8).
	// Measured host labels ("production-eu-west-1": 3.68, 5% digits) stay
	// below.
	entropyMinLen    = 16
	entropyMaxBits   = 3.9
	entropyDigitBits = 3.3
	// maxPrefixLen bounds what an "*.suffix" pattern lets vary.
	maxPrefixLen = 100
)

// query is a parsed, single-question DNS query.
type query struct {
	id       uint16
	rd       bool
	question dnsmessage.Question
	name     string // lower case, no trailing dot
}

// errFormat is a query netd cannot parse: answered with FORMERR if it has
// at least a header, otherwise dropped.
var errFormat = errors.New("malformed DNS query")

// parseQuery parses an untrusted query from the agent.
func parseQuery(b []byte) (query, error) {
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil {
		return query{}, fmt.Errorf("%w: %w", errFormat, err)
	}
	if h.Response || h.OpCode != 0 {
		return query{id: h.ID}, fmt.Errorf("%w: not a standard query", errFormat)
	}
	qs, err := p.AllQuestions()
	if err != nil {
		return query{id: h.ID}, fmt.Errorf("%w: %w", errFormat, err)
	}
	if len(qs) != 1 {
		return query{id: h.ID}, fmt.Errorf("%w: %d questions", errFormat, len(qs))
	}
	q := qs[0]
	return query{id: h.ID, rd: h.RecursionDesired, question: q, name: strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))}, nil
}

// decision is what netd does with a query.
type decision int

const (
	deny    decision = iota // NXDOMAIN, counted as a denial
	forward                 // ask upstream, add the addresses
	noData                  // allowed name, type netd does not forward
)

// reasonNotListed is the denial of a well-formed name the policy does not
// list: the only kind a user may be asked about.
const reasonNotListed = "not in allow_domains"

// decide applies the policy and the name checks to q. reason explains a
// denial for the log and `lazaret net status`.
func decide(q query, p netpolicy.Policy) (d decision, reason string) {
	if q.question.Class != dnsmessage.ClassINET {
		return deny, "class not IN"
	}
	if len(q.name) > maxNameLen {
		return deny, "name too long"
	}
	for _, l := range strings.Split(q.name, ".") {
		if len(l) > maxLabel {
			return deny, "label too long"
		}
	}
	if !p.AllowsName(q.name) {
		return deny, reasonNotListed
	}
	if prefix := variablePart(q.name, p); prefix != "" {
		if len(prefix) > maxPrefixLen {
			return deny, "name too long under a wildcard"
		}
		for _, l := range strings.Split(prefix, ".") {
			if looksEncoded(l) {
				return deny, "high-entropy name"
			}
		}
	}
	switch q.question.Type {
	case dnsmessage.TypeA, dnsmessage.TypeAAAA, dnsmessage.TypeCNAME:
		return forward, ""
	}
	return noData, ""
}

// variablePart is the part of name in front of the suffix of the "*."
// pattern it matches; empty when an exact pattern matches.
func variablePart(name string, p netpolicy.Policy) string {
	best := ""
	for _, d := range p.AllowDomains {
		if d.Pattern == name {
			return ""
		}
		if suffix, ok := strings.CutPrefix(d.Pattern, "*."); ok && strings.HasSuffix(name, "."+suffix) {
			v := strings.TrimSuffix(name, "."+suffix)
			if best == "" || len(v) < len(best) {
				best = v
			}
		}
	}
	return best
}

// looksEncoded reports whether a label looks like data encoded for DNS
// tunnelling (see the constants above).
func looksEncoded(l string) bool {
	if len(l) < entropyMinLen {
		return false
	}
	h := entropy(l)
	if h > entropyMaxBits {
		return true
	}
	digits := 0
	for i := 0; i < len(l); i++ {
		if l[i] >= '0' && l[i] <= '9' {
			digits++
		}
	}
	return digits*4 >= len(l) && h > entropyDigitBits
}

// entropy is the Shannon entropy of s in bits per character.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var h float64
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			f := float64(c) / n
			h -= f * math.Log2(f)
		}
	}
	return h
}

// reply builds an answer to q with rcode and no records.
func reply(q query, rcode dnsmessage.RCode) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{
		ID: q.id, Response: true, RecursionDesired: q.rd, RecursionAvailable: true, RCode: rcode,
	})
	b.EnableCompression()
	if q.question.Name.Length > 0 {
		if b.StartQuestions() == nil {
			b.Question(q.question)
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// upstreamQuery is the query netd sends upstream: only the question, a
// fresh random ID, recursion desired and EDNS0 with a 1232-byte payload.
func upstreamQuery(q query) (uint16, []byte, error) {
	id := uint16(rand.Uint32())
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		return 0, nil, err
	}
	if err := b.Question(q.question); err != nil {
		return 0, nil, err
	}
	if err := b.StartAdditionals(); err != nil {
		return 0, nil, err
	}
	var opt dnsmessage.ResourceHeader
	if err := opt.SetEDNS0(1232, dnsmessage.RCodeSuccess, false); err != nil {
		return 0, nil, err
	}
	if err := b.OPTResource(opt, dnsmessage.OPTResource{}); err != nil {
		return 0, nil, err
	}
	out, err := b.Finish()
	return id, out, err
}

// learned is an address from an upstream answer.
type learned struct {
	addr netip.Addr
	ttl  time.Duration
}

// maxLearned bounds the addresses one answer may add (and return): a huge
// answer cannot fill the allow sets at once.
const maxLearned = 32

// readAnswer checks an upstream response against the query and returns it
// rewritten for the client (the client's ID, TTLs clamped to at most max)
// together with the addresses it may open and their clamped TTLs. Only
// records on the CNAME chain of the name asked, of the type asked (and
// the chain's CNAMEs), stay in the answer: a record for another name is
// one the client would not use but netd would have opened.
func readAnswer(resp []byte, id uint16, q query, minTTL, maxTTL time.Duration) ([]byte, []learned, error) {
	var m dnsmessage.Message
	if err := m.Unpack(resp); err != nil {
		return nil, nil, fmt.Errorf("upstream answer: %w", err)
	}
	if !m.Header.Response || m.Header.ID != id {
		return nil, nil, fmt.Errorf("upstream answer: wrong id or not a response")
	}
	if len(m.Questions) != 1 || !strings.EqualFold(m.Questions[0].Name.String(), q.question.Name.String()) || m.Questions[0].Type != q.question.Type {
		return nil, nil, fmt.Errorf("upstream answer: question mismatch")
	}
	chain := cnameChain(m.Answers, q.question.Name.String())
	var ls []learned
	var kept []dnsmessage.Resource
	maxSec := uint32(maxTTL / time.Second)
	for _, rr := range m.Answers {
		if !chain[strings.ToLower(rr.Header.Name.String())] {
			continue
		}
		if rr.Header.TTL > maxSec {
			rr.Header.TTL = maxSec
		}
		ttl := max(time.Duration(rr.Header.TTL)*time.Second, minTTL)
		var a netip.Addr
		switch body := rr.Body.(type) {
		case *dnsmessage.CNAMEResource:
			kept = append(kept, rr)
			continue
		case *dnsmessage.AResource:
			a = netip.AddrFrom4(body.A)
		case *dnsmessage.AAAAResource:
			// Not unmapped: ::ffff:a.b.c.d must reach the filter as what it
			// is, not as an IPv4 address.
			a = netip.AddrFrom16(body.AAAA)
		default:
			continue
		}
		if rr.Header.Type != q.question.Type || len(ls) == maxLearned {
			continue
		}
		ls = append(ls, learned{a, ttl})
		kept = append(kept, rr)
	}
	// Authority and additional records could carry addresses that were
	// never added to the allow sets.
	m.Answers, m.Authorities, m.Additionals = kept, nil, nil
	m.Header.ID = q.id
	m.Header.RecursionDesired = q.rd
	out, err := m.Pack()
	if err != nil {
		return nil, nil, fmt.Errorf("repack answer: %w", err)
	}
	return out, ls, nil
}

// dropAddrs removes from an answer readAnswer made the A and AAAA records
// whose address refused names (a non-empty reason). In pod mode there is
// no ruleset to keep such an address closed, so the agent must never see
// it: an allowed name must not aim the sandbox at the pod network, the
// node or the metadata server.
func dropAddrs(out []byte, refused func(netip.Addr) string) ([]byte, error) {
	var m dnsmessage.Message
	if err := m.Unpack(out); err != nil {
		return nil, err
	}
	kept := m.Answers[:0]
	for _, rr := range m.Answers {
		switch body := rr.Body.(type) {
		case *dnsmessage.AResource:
			if refused(netip.AddrFrom4(body.A)) != "" {
				continue
			}
		case *dnsmessage.AAAAResource:
			if refused(netip.AddrFrom16(body.AAAA)) != "" {
				continue
			}
		}
		kept = append(kept, rr)
	}
	m.Answers = kept
	return m.Pack()
}

// cnameChain is the set of names (lower case, with the trailing dot) on
// the CNAME chain from name through the answer section, whatever the
// records' order; its length is bounded by the number of records.
func cnameChain(answers []dnsmessage.Resource, name string) map[string]bool {
	chain := map[string]bool{strings.ToLower(name): true}
	for grew := true; grew; {
		grew = false
		for _, rr := range answers {
			c, ok := rr.Body.(*dnsmessage.CNAMEResource)
			if !ok || !chain[strings.ToLower(rr.Header.Name.String())] {
				continue
			}
			if t := strings.ToLower(c.CNAME.String()); !chain[t] {
				chain[t], grew = true, true
			}
		}
	}
	return chain
}

// upstreamDialer dials upstream with netd's socket mark, which the ruleset
// lets through to port 53; without mark (pod mode: no ruleset, and no
// CAP_NET_ADMIN to set one) a plain dialer.
func upstreamDialer(timeout time.Duration, mark bool) *net.Dialer {
	if !mark {
		return &net.Dialer{Timeout: timeout}
	}
	return &net.Dialer{
		Timeout: timeout,
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(netpolicy.UpstreamMark))
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("SO_MARK (needs CAP_NET_ADMIN): %w", serr)
			}
			return nil
		},
	}
}

// exchange sends msg to upstream over UDP and falls back to TCP when the
// answer is truncated; mark sets netd's socket mark (upstreamDialer).
func exchange(ctx context.Context, upstream netip.AddrPort, id uint16, msg []byte, mark bool) ([]byte, error) {
	d := upstreamDialer(2*time.Second, mark)
	c, err := d.DialContext(ctx, "udp", upstream.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		if n < 12 || binary.BigEndian.Uint16(buf[:2]) != id {
			continue // stray or spoofed datagram
		}
		if buf[2]&0x02 == 0 { // not truncated
			return buf[:n], nil
		}
		break
	}
	tc, err := d.DialContext(ctx, "tcp", upstream.String())
	if err != nil {
		return nil, err
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(3 * time.Second))
	framed := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
	if _, err := tc.Write(append(framed, msg...)); err != nil {
		return nil, err
	}
	return readFramed(tc)
}

// readFramed reads one length-prefixed DNS message from a TCP stream.
func readFramed(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint16(l[:])
	if n < 12 {
		return nil, errFormat
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
