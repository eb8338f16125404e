package kubecli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/capped"
	"github.com/lazaret-dev/lazaret/internal/engine/netdpod"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// podNetd is a running pod's netd as the proposal manager asks it
// (proposal.Netd): each request is an exec into netd's own container,
// `/lazaret-netd ctl`, which hands it to the control socket in the
// emptyDir only that container mounts (docs/KUBERNETES.md, "netd's
// control socket in the pod"). The change is live at once: no ConfigMap
// is edited (netd reads it only at start) and the pod is not restarted.
type podNetd struct {
	c   *kube.Client
	pod string
	// timeout bounds one exec (the API server's round trip and netd's
	// answer); 15 s when zero.
	timeout time.Duration
}

// netdCtlCommand is the command the exec runs in netd's container.
var netdCtlCommand = []string{"/lazaret-netd", "ctl"}

// maxCtlAnswer bounds what is read of the exec's stdout.
const maxCtlAnswer = netdapi.MaxMessage + 1

func (n *podNetd) do(ctx context.Context, req netdapi.Request) (*netdapi.Response, error) {
	req.Version = netdapi.Version
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	to := n.timeout
	if to == 0 {
		to = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	out, errb := &capped.Buffer{Max: maxCtlAnswer}, &capped.Buffer{Max: 4096}
	code, err := n.c.ExecIn(ctx, kube.ExecRequest{Pod: n.pod, Container: netdpod.ContainerName, Command: netdCtlCommand,
		Stdin: bytes.NewReader(append(b, '\n')), Stdout: out, Stderr: errb})
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, strings.TrimSpace(errb.String()))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: pod %s: %v", netdapi.ErrUnavailable, n.pod, oneLine(err))
	}
	var resp netdapi.Response
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &resp); err != nil {
		return nil, fmt.Errorf("netd of pod %s: bad answer: %w", n.pod, err)
	}
	if !resp.OK {
		return &resp, fmt.Errorf("netd: %s", resp.Error)
	}
	return &resp, nil
}

// Status implements proposal.Netd.
func (n *podNetd) Status(ctx context.Context) (*netdapi.Status, error) {
	resp, err := n.do(ctx, netdapi.Request{Op: netdapi.OpStatus})
	if err != nil {
		return nil, err
	}
	if resp.Status == nil {
		return nil, errors.New("netd: status missing from the answer")
	}
	return resp.Status, nil
}

// Allow implements proposal.Netd.
func (n *podNetd) Allow(ctx context.Context, target string, d time.Duration, reason string) (*netdapi.Status, error) {
	resp, err := n.do(ctx, netdapi.Request{Op: netdapi.OpAllow, Target: target, ForSeconds: int64(d / time.Second), Reason: reason})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

// Decide implements proposal.Netd.
func (n *podNetd) Decide(ctx context.Context, name string, allow bool, reason string) error {
	_, err := n.do(ctx, netdapi.Request{Op: netdapi.OpDecide, Target: name, Allow: allow, Reason: reason})
	return err
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// podNetLimit says which network rules a running pod can take
// (proposal.Options.NetLimit). netd's allowlist is live, so a name (exact
// or a wildcard) is taken: it then resolves in the pod, as a name of the
// profile's allow_domains does, and its connections go where the pod's
// NetworkPolicy lets them (its template's allow_egress CIDRs; everywhere
// on a cluster that does not enforce NetworkPolicy), exactly as for that
// allow_domains name. An address or CIDR is refused: only the
// NetworkPolicy could open it, and that is the template's (every sandbox
// of the template shares it, agent-sandbox keeps it as the template
// says), which lazaret does not change for one running sandbox.
func podNetLimit(_ context.Context, rule string) string {
	if isName(rule) {
		return ""
	}
	return "on Kubernetes an address or CIDR is opened by the pod's NetworkPolicy, which is its template's and is not changed while the sandbox runs: the user adds it to the profile's allow_egress and starts the sandbox again"
}

// isName reports whether rule is a domain pattern, not an address or
// CIDR.
func isName(rule string) bool {
	_, err := netip.ParseAddr(rule)
	return err != nil && !strings.Contains(rule, "/")
}
