package notify

import (
	"fmt"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// Title is a notice's one-line summary: lazaret's words only.
func Title(n Notice) string {
	var what string
	switch n.Kind {
	case ctl.EventApprovalPending:
		what = "approval needed"
		if n.RequestKind == ctl.RequestNetwork {
			what = "approval needed (network)"
		} else if n.RequestKind == ctl.RequestEscalation {
			what = "approval needed (host command)"
		}
	case ctl.EventNetDenied:
		what = "network request denied"
	case ctl.EventSessionEnded:
		what = "session ended"
	case ctl.EventAgentAttention:
		what = "agent waiting for input"
	case ctl.EventSandboxStopped:
		what = "sandbox stopped"
	default:
		what = n.Kind
	}
	return fmt.Sprintf("Lazaret: %s - %s", what, n.Profile)
}

// Body is a notice's text: the sandbox, the request or session, what to
// run, how many were merged, and with include_request the request's text
// (already escaped and shortened by filter).
func Body(n Notice) string {
	var b strings.Builder
	fmt.Fprintf(&b, "profile %s, workspace %s", n.Profile, n.Workspace)
	if n.Request != "" {
		fmt.Fprintf(&b, ", request %s", n.Request)
	}
	if n.Session != "" {
		fmt.Fprintf(&b, ", session %s", n.Session)
	}
	b.WriteString(".")
	if n.Kind == ctl.EventApprovalPending {
		fmt.Fprintf(&b, " Answer with: lazaret approvals show %s", n.Request)
	}
	if n.Reason != "" {
		fmt.Fprintf(&b, " (%s)", n.Reason)
	}
	if n.Merged > 0 {
		fmt.Fprintf(&b, " %d %s events since the last notification; this was the last.", n.Merged, n.Kind)
	}
	if n.Detail != "" {
		fmt.Fprintf(&b, "\nRequest: %s", n.Detail)
	}
	return b.String()
}
