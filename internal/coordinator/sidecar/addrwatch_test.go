package sidecar

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const addrWatchHelperEnv = "LAZARET_TEST_ADDRWATCH_HELPER"

// ipTool is iproute2's ip, which a test user's PATH may lack.
func ipTool(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"ip", "/usr/sbin/ip", "/sbin/ip"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Skip("no ip (iproute2)")
	return ""
}

// TestAddrChangesNotified runs TestAddrWatchHelper in a user and network
// namespace of its own: adding an address (IPv4, then IPv6) and removing
// one are each notified at once. The control: nothing is notified while
// nothing changes.
func TestAddrChangesNotified(t *testing.T) {
	ipTool(t)
	if err := exec.Command("unshare", "-rn", "true").Run(); err != nil {
		t.Skipf("no user and network namespace for the test: %v", err)
	}
	cmd := exec.Command("unshare", "-rn", os.Args[0], "-test.run=^TestAddrWatchHelper$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), addrWatchHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for _, want := range []string{"addrwatch: quiet", "addrwatch: added 192.0.2.7", "addrwatch: removed 192.0.2.7", "addrwatch: added 2001:db8::7"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("helper output lacks %q:\n%s", want, out)
		}
	}
}

// TestAddrWatchHelper is TestAddrChangesNotified's other half.
func TestAddrWatchHelper(t *testing.T) {
	if os.Getenv(addrWatchHelperEnv) == "" {
		t.Skip("run by TestAddrChangesNotified in a namespace of its own")
	}
	ip := ipTool(t)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	run("link", "set", "lo", "up") // before the watch: its own addresses appear
	time.Sleep(100 * time.Millisecond)
	w, err := watchAddrChanges()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case <-w.C:
		t.Fatal("a change notified while nothing changed")
	case <-time.After(300 * time.Millisecond):
		fmt.Println("addrwatch: quiet")
	}
	step := func(what string, args ...string) {
		t.Helper()
		run(args...)
		select {
		case <-w.C:
			fmt.Println("addrwatch:", what)
		case <-time.After(2 * time.Second):
			t.Errorf("%s: not notified", what)
		}
		time.Sleep(50 * time.Millisecond)
		for len(w.C) > 0 { // one change may be several messages
			<-w.C
		}
	}
	step("added 192.0.2.7", "addr", "add", "192.0.2.7/32", "dev", "lo")
	step("removed 192.0.2.7", "addr", "del", "192.0.2.7/32", "dev", "lo")
	step("added 2001:db8::7", "-6", "addr", "add", "2001:db8::7/128", "dev", "lo")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-w.C:
		if ok {
			<-w.C
		}
	case <-time.After(2 * time.Second):
		t.Error("the channel stays open after Close")
	}
}
