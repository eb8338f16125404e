// Package desktopnotify is the only importer of godbus: the freedesktop
// Notifications service (org.freedesktop.Notifications) on the user's
// session bus, for the coordinator's desktop notifier and doctor's check.
// Only unix: bus addresses are dialled: godbus would run a program for an
// autolaunch: or unixexec: one.
package desktopnotify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/godbus/dbus/v5"
)

// The service's well-known name, object and interface.
const (
	Name  = "org.freedesktop.Notifications"
	Path  = dbus.ObjectPath("/org/freedesktop/Notifications")
	Iface = "org.freedesktop.Notifications"
)

// AppName is the application name the notifications carry.
const AppName = "Lazaret"

// Urgency levels of the "urgency" hint.
const (
	UrgencyNormal   byte = 1
	UrgencyCritical byte = 2
)

// ErrNoBus: neither DBUS_SESSION_BUS_ADDRESS nor $XDG_RUNTIME_DIR/bus.
var ErrNoBus = errors.New("no session bus: DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus does not exist")

// SessionAddress is the user's session bus address, as the freedesktop
// spec finds it: the variable, else the socket in the runtime directory.
func SessionAddress() (string, error) {
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" {
		return a, nil
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		p := filepath.Join(x, "bus")
		if fi, err := os.Stat(p); err == nil && fi.Mode().Type() == os.ModeSocket {
			return "unix:path=" + p, nil
		}
	}
	return "", ErrNoBus
}

// Conn is a private connection to a bus.
type Conn struct {
	c *dbus.Conn
}

// Dial connects to the bus at addr ("" = SessionAddress), authenticates
// and says hello. The connection lives until Close or the end of ctx.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	if addr == "" {
		a, err := SessionAddress()
		if err != nil {
			return nil, err
		}
		addr = a
	}
	for _, part := range strings.Split(addr, ";") {
		if !strings.HasPrefix(part, "unix:") {
			return nil, fmt.Errorf("session bus address %q: only unix: addresses are used", part)
		}
	}
	c, err := dbus.Connect(addr, dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("session bus: %w", err)
	}
	return &Conn{c: c}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// ServerInfo is GetServerInformation: the notification server's name,
// vendor and version; an error when none runs.
func (c *Conn) ServerInfo(ctx context.Context) (name, vendor, version string, err error) {
	var spec string
	err = c.c.Object(Name, Path).CallWithContext(ctx, Iface+".GetServerInformation", 0).Store(&name, &vendor, &version, &spec)
	if err != nil {
		return "", "", "", fmt.Errorf("%s.GetServerInformation: %w", Iface, err)
	}
	return name, vendor, version, nil
}

// Notify shows one notification, with no actions (nothing to click but
// dismiss). body is shown as the server's markup subset: the caller
// escapes it (EscapeMarkup).
func (c *Conn) Notify(ctx context.Context, summary, body string, urgency byte) error {
	hints := map[string]dbus.Variant{"urgency": dbus.MakeVariant(urgency)}
	var id uint32
	err := c.c.Object(Name, Path).CallWithContext(ctx, Iface+".Notify", 0,
		AppName, uint32(0), "", summary, body, []string{}, hints, int32(-1)).Store(&id)
	if err != nil {
		return fmt.Errorf("%s.Notify: %w", Iface, err)
	}
	return nil
}

// EscapeMarkup makes s plain text in a notification body, where servers
// interpret <b>, <i>, <a href>, <img> and entities.
func EscapeMarkup(s string) string {
	return markup.Replace(s)
}

var markup = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")
