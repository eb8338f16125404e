package doctor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// notifyTimeout bounds each notifier's check.
const notifyTimeout = 5 * time.Second

// checkNotify checks every notifier of [notify] without sending anything:
// the session bus and its notification server, the webhook's and ntfy's
// host (resolves, accepts TLS), the webhook's key, the command's program.
// A failure is a warning: the sandbox works, the user is not told.
func checkNotify(ctx context.Context, n config.Notify, busAddr string) []Result {
	var rs []Result
	if n.Desktop {
		rs = append(rs, checkDesktop(ctx, busAddr))
	}
	if w := n.Webhook; w != nil {
		rs = append(rs, checkEndpoint(ctx, "notify webhook", w.URL))
		if err := w.CheckSecret(); err != nil {
			rs = append(rs, warn("notify webhook secret", err.Error(),
				"set the variable in the environment lazaret starts from, or make the file the user's own with chmod 600 (docs/NOTIFY.md)"))
		} else {
			rs = append(rs, pass("notify webhook secret", "readable"))
		}
	}
	if nt := n.Ntfy; nt != nil {
		rs = append(rs, checkEndpoint(ctx, "notify ntfy", nt.Endpoint()))
	}
	if len(n.Command) > 0 {
		if p, err := exec.LookPath(n.Command[0]); err != nil {
			rs = append(rs, warn("notify command", err.Error(), "install it, or give its absolute path in [notify] command"))
		} else {
			rs = append(rs, pass("notify command", p))
		}
	}
	return rs
}

func warn(name, detail, fix string) Result {
	r := fail(name, detail, fix)
	r.Warning = true
	return r
}

func checkDesktop(ctx context.Context, addr string) Result {
	const name = "notify desktop"
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	c, err := desktopnotify.Dial(ctx, addr)
	if err != nil {
		return warn(name, err.Error(), "run lazaret from your desktop session (DBUS_SESSION_BUS_ADDRESS set), or set desktop = false")
	}
	defer c.Close()
	srv, vendor, ver, err := c.ServerInfo(ctx)
	if err != nil {
		return warn(name, "no notification server on the session bus: "+err.Error(), "start one (your desktop's, or e.g. dunst or mako), or set desktop = false")
	}
	return pass(name, fmt.Sprintf("%s %s (%s)", srv, ver, vendor))
}

// checkEndpoint resolves raw's host and completes a TLS handshake with
// it (the system's roots verify it); nothing is posted. A loopback http
// URL is only connected to.
func checkEndpoint(ctx context.Context, name, raw string) Result {
	u, err := url.Parse(raw)
	if err != nil {
		return warn(name, err.Error(), "fix the URL in [notify]")
	}
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	host := u.Hostname()
	if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
		return warn(name, fmt.Sprintf("%s does not resolve: %v", host, err), "check the host name and this machine's DNS")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	addr := net.JoinHostPort(host, port)
	var conn net.Conn
	if u.Scheme == "https" {
		conn, err = (&tls.Dialer{}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		var ce *tls.CertificateVerificationError
		if errors.As(err, &ce) {
			return warn(name, fmt.Sprintf("%s: certificate not trusted: %v", addr, err), "the receiver needs a certificate this machine's trust store accepts")
		}
		return warn(name, fmt.Sprintf("%s: %v", addr, err), "check that the receiver runs and that this machine may reach it")
	}
	conn.Close()
	return pass(name, addr+" accepts "+u.Scheme)
}
