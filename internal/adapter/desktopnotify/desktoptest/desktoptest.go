// Package desktoptest is the tests' desktop: a private dbus-daemon and a
// Notifications service, exported with godbus, that records each call.
package desktoptest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify"
)

// Daemon is where the daemon is installed (Debian's dbus-daemon package).
const Daemon = "/usr/bin/dbus-daemon"

// Bus starts a private session bus for t and returns its address. Without
// dbus-daemon the test is skipped, unless CI is set: there it must run.
func Bus(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath(Daemon)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (scripts/setup installs dbus-daemon): %v", Daemon, err)
		}
		t.Skipf("%s is missing (scripts/setup installs dbus-daemon)", Daemon)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "--session", "--nofork", "--print-address", "--address=unix:path="+filepath.Join(dir, "bus"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Its stderr (the fd limit it cannot raise as a user) is noise.
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon gave no address: %v", err)
	}
	return strings.TrimSpace(line)
}

// Call is one Notify call the service received.
type Call struct {
	App, Summary, Body string
	Actions            []string
	Urgency            byte
}

// Service is a Notifications server on a bus: its Calls channel gets
// every Notify.
type Service struct {
	Calls chan Call
	mu    sync.Mutex
	n     uint32
}

// Notify is org.freedesktop.Notifications.Notify.
func (s *Service) Notify(app string, _ uint32, _ string, summary, body string, actions []string, hints map[string]dbus.Variant, _ int32) (uint32, *dbus.Error) {
	var u byte
	if v, ok := hints["urgency"]; ok {
		u, _ = v.Value().(byte)
	}
	select {
	case s.Calls <- Call{App: app, Summary: summary, Body: body, Actions: actions, Urgency: u}:
	default: // the test stopped reading: drop
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.n, nil
}

// GetServerInformation is the server's identity.
func (s *Service) GetServerInformation() (string, string, string, string, *dbus.Error) {
	return "lazaret-test", "lazaret", "1.0", "1.2", nil
}

// Serve exports a Service on the bus at addr under the Notifications
// name, until the test ends.
func Serve(t testing.TB, addr string) *Service {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &Service{Calls: make(chan Call, 4096)}
	if err := conn.Export(s, desktopnotify.Path, desktopnotify.Iface); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName(desktopnotify.Name, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("taking %s: %v (reply %v)", desktopnotify.Name, err, reply)
	}
	return s
}
