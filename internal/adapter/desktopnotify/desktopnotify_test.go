package desktopnotify_test

import (
	"context"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify"
	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify/desktoptest"
)

func TestNotifyOnPrivateBus(t *testing.T) {
	addr := desktoptest.Bus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := desktopnotify.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// No server yet: the check says so (the negative of the next one).
	if _, _, _, err := c.ServerInfo(ctx); err == nil {
		t.Fatal("ServerInformation without a server")
	}
	svc := desktoptest.Serve(t, addr)
	if name, _, _, err := c.ServerInfo(ctx); err != nil || name != "lazaret-test" {
		t.Fatalf("server %q: %v", name, err)
	}
	body := desktopnotify.EscapeMarkup(`<a href="x">y</a> & 'z'`)
	if err := c.Notify(ctx, "s", body, desktopnotify.UrgencyCritical); err != nil {
		t.Fatal(err)
	}
	got := <-svc.Calls
	if got.App != desktopnotify.AppName || got.Summary != "s" || len(got.Actions) != 0 || got.Urgency != desktopnotify.UrgencyCritical ||
		got.Body != "&lt;a href=&quot;x&quot;&gt;y&lt;/a&gt; &amp; &apos;z&apos;" {
		t.Fatalf("call %+v", got)
	}
}

func TestDialRefusesNonUnix(t *testing.T) {
	for _, a := range []string{"autolaunch:", "unixexec:path=/bin/sh", "unix:path=/x;tcp:host=a,port=1"} {
		if _, err := desktopnotify.Dial(context.Background(), a); err == nil {
			t.Errorf("%s dialled", a)
		}
	}
}

func TestSessionAddress(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	if _, err := desktopnotify.SessionAddress(); err != desktopnotify.ErrNoBus {
		t.Fatalf("no bus: %v", err)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1/bus")
	if a, err := desktopnotify.SessionAddress(); err != nil || a != "unix:path=/run/user/1/bus" {
		t.Fatalf("%q %v", a, err)
	}
}
