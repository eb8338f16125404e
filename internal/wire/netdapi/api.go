// Package api is the control protocol of lazaret-netd: JSON messages over
// the sidecar's UNIX control socket, one request and one response per
// connection, and the host-side client. The host CLI and the Session
// Coordinator speak it directly; nothing inside the sandbox can reach it.
package netdapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
)

// Version is the protocol version; a request with another version is
// refused, so a mismatched CLI and sidecar fail loudly.
const Version = 1

// Operations.
const (
	OpStatus    = "status"     // report the state
	OpSetPolicy = "set_policy" // replace the whole policy
	OpAllow     = "allow"      // add one CIDR or domain, optionally expiring
	// OpHostAddrs replaces the host's own addresses, which no DNS answer
	// opens (the coordinator refreshes them when the host's change).
	OpHostAddrs = "host_addrs"
	// OpEvents waits (up to WaitSeconds) for denial events after After.
	OpEvents = "events"
	// OpHold makes denied DNS names wait up to HoldSeconds for a
	// decision (0 turns holding off): the coordinator sets it while a
	// session can be asked.
	OpHold = "hold"
	// OpDecide is the user's decision on a denied name (Target, Allow):
	// allowed, the exact name is added to the policy for this sandbox run
	// and waiting queries are answered from upstream; denied, they get
	// NXDOMAIN and the name is not held again.
	OpDecide = "decide"
	// OpSecrets hands netd the sandbox's secrets, its interception CA
	// (certificate and key) and the roots that verify upstream servers;
	// netd then answers the secrets' hosts itself and injects. Once.
	OpSecrets = "secrets"
	// OpSecretValue replaces one secret's value (Target, Value): a token
	// its command refreshed.
	OpSecretValue = "secret_value"
	// OpClaim makes a spare netd (started with --spare-expiry, before
	// any sandbox) the sidecar of the sandbox being started: it takes
	// the sandbox's whole policy (Policy, temporary entries included) and
	// the host's addresses (Addrs), stops its expiry and answers with
	// the ruleset installed. Once per netd; refused by one that is no
	// spare or was started with another SpareKey (another image,
	// upstreams or flags than the sandbox's).
	OpClaim = "claim"
)

// MaxMessage bounds one request or response line.
const MaxMessage = 1 << 20

// Request is one control message.
type Request struct {
	Version int               `json:"version"`
	Op      string            `json:"op"`
	Policy  *netpolicy.Policy `json:"policy,omitempty"`
	// Target is a CIDR, an address or a domain pattern (OpAllow).
	Target string `json:"target,omitempty"`
	// ForSeconds makes an OpAllow entry expire; 0 is permanent.
	ForSeconds int64 `json:"for_seconds,omitempty"`
	// Reason is logged with the change ("lazaret net allow", "reload").
	Reason string `json:"reason,omitempty"`
	// Addrs are the host's addresses (OpHostAddrs, OpClaim).
	Addrs []netip.Addr `json:"addrs,omitempty"`
	// SpareKey is OpClaim's: the key the spare was started with.
	SpareKey string `json:"spare_key,omitempty"`
	// After and WaitSeconds select the events of OpEvents.
	After       uint64 `json:"after,omitempty"`
	WaitSeconds int64  `json:"wait_seconds,omitempty"`
	// HoldSeconds is OpHold's bound; Allow is OpDecide's answer.
	HoldSeconds int64 `json:"hold_seconds,omitempty"`
	Allow       bool  `json:"allow,omitempty"`
	// Secrets, CACert (PEM), CAKey (PKCS #8) and Roots (PEM) are
	// OpSecrets'; Value is OpSecretValue's. They carry credentials: a
	// Request is never logged.
	Secrets []secret.Secret `json:"secrets,omitempty"`
	CACert  []byte          `json:"ca_cert,omitempty"`
	CAKey   []byte          `json:"ca_key,omitempty"`
	Roots   []byte          `json:"roots,omitempty"`
	Value   string          `json:"value,omitempty"`
}

// Response answers a Request.
type Response struct {
	OK     bool    `json:"ok"`
	Error  string  `json:"error,omitempty"`
	Status *Status `json:"status,omitempty"`
	// Spare says the answer comes from an unclaimed spare sidecar, which
	// serves no sandbox (it refuses every request but status and claim).
	Spare bool `json:"spare,omitempty"`
	// Events and Seq answer OpEvents: the events after the request's
	// After, oldest first, and the newest sequence number.
	Events []DenialEvent `json:"events,omitempty"`
	Seq    uint64        `json:"seq,omitempty"`
}

// DenialEvent is one denial as it happened, for notices and prompts. Name
// and Dest come from the sandbox (a DNS question is the agent's choice):
// whoever shows them escapes them.
type DenialEvent struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Dest is "dns NAME" or "tcp ADDR:PORT" (as in Denial).
	Dest string `json:"dest"`
	// Name is the DNS name asked, for a DNS denial.
	Name   string `json:"name,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Held means the query waits for OpDecide (up to the hold time).
	Held bool `json:"held,omitempty"`
	// Secret names the secret whose placeholder went to Name, a host it
	// is not for (it was not replaced).
	Secret string `json:"secret,omitempty"`
	// NeverOpened, for a packet denial, says why no policy opens its
	// destination (netpolicy.NeverOpened): its notice then offers no
	// `lazaret net allow`.
	NeverOpened string `json:"never_opened,omitempty"`
}

// Status is netd's state.
type Status struct {
	// Applied is true once the ruleset is installed; the sandbox is started
	// only after that.
	Applied   bool             `json:"applied"`
	Version   string           `json:"version"`
	Policy    netpolicy.Policy `json:"policy"`
	Upstreams []string         `json:"upstreams"`
	Resolved  []Resolved       `json:"resolved"`
	Denials   []Denial         `json:"denials"`
	// Counters are the packet counters of the ruleset's counted rules.
	Counters map[string]uint64 `json:"counters"`
	// DenialLog says how denials are seen ("nflog" or "counters only").
	DenialLog string   `json:"denial_log"`
	Changes   []Change `json:"changes"`
	// HostAddrs are the host addresses no DNS answer opens.
	HostAddrs []netip.Addr `json:"host_addrs"`
	// Grace is how long (seconds) a resolved address stays open at least
	// after the last answer that named it.
	Grace int64 `json:"grace_seconds"`
	// Hold is how long (seconds) a denied name waits for the user's
	// decision; 0 when no session can be asked.
	Hold int64 `json:"hold_seconds,omitempty"`
	// Secrets counts, per secret and host, the requests injected and the
	// placeholders refused (sent to a host the secret is not for).
	Secrets []secret.Stat `json:"secrets,omitempty"`
	// Injecting lists the hosts netd intercepts (those of the secrets).
	Injecting []string `json:"injecting,omitempty"`
	// Firewall is what enforces IP-level egress in the namespace:
	// "nftables" (netd's ruleset) or, in pod mode, none (the pod's
	// NetworkPolicy does).
	Firewall string `json:"firewall,omitempty"`
}

// Resolved is an address added to the allow sets by an allowed name.
type Resolved struct {
	Name    string    `json:"name"`
	Addr    string    `json:"addr"`
	Expires time.Time `json:"expires"`
}

// Denial is the count of blocked packets or names for one destination.
type Denial struct {
	Dest  string    `json:"dest"` // "tcp 1.2.3.4:443", "dns evil.example"
	Count uint64    `json:"count"`
	Last  time.Time `json:"last"`
}

// Change is one logged policy change.
type Change struct {
	Time time.Time `json:"time"`
	What string    `json:"what"`
}

// ErrUnavailable means the control socket does not answer: the sidecar is
// not running.
var ErrUnavailable = errors.New("network sidecar not running")

// Client talks to one netd control socket.
type Client struct {
	Socket  string
	Timeout time.Duration // per request; 10 s when zero
	// Sandbox makes an unclaimed spare sidecar answer as if no sidecar
	// ran (ErrUnavailable): the user's `lazaret net` is about a running
	// sandbox, and a spare serves none.
	Sandbox bool
}

// Do sends req and returns the response; a response with OK false is an
// error carrying netd's message.
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	req.Version = Version
	to := c.Timeout
	if to == 0 {
		to = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, c.Socket, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("netd control %s: %w", c.Socket, err)
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64*1024), MaxMessage)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("netd control %s: %w", c.Socket, err)
		}
		return nil, fmt.Errorf("netd control %s: connection closed without an answer", c.Socket)
	}
	var resp Response
	if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("netd control %s: bad answer: %w", c.Socket, err)
	}
	if resp.Spare && c.Sandbox {
		return nil, fmt.Errorf("%w: %s: an unclaimed spare sidecar", ErrUnavailable, c.Socket)
	}
	if !resp.OK {
		return &resp, fmt.Errorf("netd: %s", resp.Error)
	}
	return &resp, nil
}

// Status asks for the status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	resp, err := c.Do(ctx, Request{Op: OpStatus})
	if err != nil {
		return nil, err
	}
	if resp.Status == nil {
		return nil, fmt.Errorf("netd: status missing from the answer")
	}
	return resp.Status, nil
}

// Spare reports whether the socket's netd is an unclaimed spare sidecar
// (one a sandbox left for the domain's next start).
func (c *Client) Spare(ctx context.Context) (bool, error) {
	resp, err := c.Do(ctx, Request{Op: OpStatus})
	if err != nil {
		return false, err
	}
	return resp.Spare, nil
}

// SetPolicy replaces the whole policy.
func (c *Client) SetPolicy(ctx context.Context, p netpolicy.Policy, reason string) (*Status, error) {
	resp, err := c.Do(ctx, Request{Op: OpSetPolicy, Policy: &p, Reason: reason})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

// Claim makes a spare netd the sidecar of a starting sandbox, with policy
// p and the host's addresses (OpClaim); key must be the spare's own.
func (c *Client) Claim(ctx context.Context, key string, p netpolicy.Policy, addrs []netip.Addr) (*Status, error) {
	resp, err := c.Do(ctx, Request{Op: OpClaim, SpareKey: key, Policy: &p, Addrs: addrs, Reason: "claimed by a starting sandbox"})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

// SetHostAddrs replaces the host addresses no DNS answer opens.
func (c *Client) SetHostAddrs(ctx context.Context, addrs []netip.Addr, reason string) error {
	_, err := c.Do(ctx, Request{Op: OpHostAddrs, Addrs: addrs, Reason: reason})
	return err
}

// Events waits up to wait for the denial events after seq after.
func (c *Client) Events(ctx context.Context, after uint64, wait time.Duration) ([]DenialEvent, uint64, error) {
	resp, err := c.Do(ctx, Request{Op: OpEvents, After: after, WaitSeconds: int64(wait / time.Second)})
	if err != nil {
		return nil, 0, err
	}
	return resp.Events, resp.Seq, nil
}

// Hold sets how long a denied DNS name waits for a decision (0: none).
func (c *Client) Hold(ctx context.Context, d time.Duration) error {
	_, err := c.Do(ctx, Request{Op: OpHold, HoldSeconds: int64(d / time.Second)})
	return err
}

// Decide answers a held (or any denied) name for this sandbox run.
func (c *Client) Decide(ctx context.Context, name string, allow bool, reason string) error {
	_, err := c.Do(ctx, Request{Op: OpDecide, Target: name, Allow: allow, Reason: reason})
	return err
}

// Allow adds a CIDR, address or domain pattern, for d (0 = permanent).
func (c *Client) Allow(ctx context.Context, target string, d time.Duration, reason string) (*Status, error) {
	resp, err := c.Do(ctx, Request{Op: OpAllow, Target: target, ForSeconds: int64(d / time.Second), Reason: reason})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

// SetSecrets hands netd the secrets, the CA and the upstream roots.
func (c *Client) SetSecrets(ctx context.Context, secrets []secret.Secret, caCert, caKey, roots []byte) error {
	_, err := c.Do(ctx, Request{Op: OpSecrets, Secrets: secrets, CACert: caCert, CAKey: caKey, Roots: roots})
	return err
}

// SetSecretValue replaces one secret's value.
func (c *Client) SetSecretValue(ctx context.Context, name, value string) error {
	_, err := c.Do(ctx, Request{Op: OpSecretValue, Target: name, Value: value})
	return err
}
