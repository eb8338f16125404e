package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runStderr runs run(args) and returns its exit code and what it wrote
// to stderr.
func runStderr(t *testing.T, args ...string) (int, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	code := run(args)
	os.Stderr = old
	w.Close()
	b, _ := io.ReadAll(r)
	return code, string(b)
}

// A pod whose policy file is missing or invalid must not start: exit ≠ 0
// and one line naming the file (and the key).
func TestPodPolicyFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "policy.json")
	code, out := runStderr(t, "--pod", "--policy-file", missing, "--upstream", "10.96.0.10")
	if code == 0 || !strings.Contains(out, missing) || strings.Count(out, "\n") != 1 {
		t.Errorf("missing file: exit %d, %q", code, out)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"allow_domains":[{"pattern":"ok.example"},{"pattern":"*.com"}]}`), 0o600)
	code, out = runStderr(t, "--pod", "--policy-file", bad, "--upstream", "10.96.0.10")
	if code == 0 || !strings.Contains(out, bad) || !strings.Contains(out, "allow_domains[1].pattern") || strings.Count(out, "\n") != 1 {
		t.Errorf("invalid file: exit %d, %q", code, out)
	}
	code, out = runStderr(t, "--pod", "--upstream", "10.96.0.10")
	if code == 0 || !strings.Contains(out, "--policy-file") {
		t.Errorf("no file: exit %d, %q", code, out)
	}
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{}`), 0o600)
	code, out = runStderr(t, "--pod", "--policy-file", good)
	if code == 0 || !strings.Contains(out, "--upstream") {
		t.Errorf("no upstream: exit %d, %q", code, out)
	}
	code, out = runStderr(t, "--policy-file", good, "--policy", "{}")
	if code == 0 || !strings.Contains(out, "give one") {
		t.Errorf("both: exit %d, %q", code, out)
	}
	code, out = runStderr(t, "frob", "--pod")
	if code != 2 || !strings.Contains(out, `unexpected argument "frob"`) || strings.Count(out, "\n") != 1 {
		t.Errorf("an unknown verb: exit %d, %q", code, out)
	}
}

// The startup probe fails while nothing answers and passes once a
// resolver does.
func TestProbe(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	if probe([]string{addr}) == 0 {
		t.Fatal("probe passed with no resolver")
	}
	pc, err = net.ListenPacket("udp", addr)
	if err != nil {
		t.Skip(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 512)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		buf[2] |= 0x80
		buf[3] = 3 // NXDOMAIN
		pc.WriteTo(buf[:n], from)
	}()
	if code := probe([]string{addr}); code != 0 {
		t.Fatalf("probe with a resolver: exit %d", code)
	}
}

// TestProbeWaitsForAStartingResolver: a resolver that starts while the
// probe runs is found by that same probe (a starting pod does not lose a
// whole probe period). Control: TestProbe's probe with no resolver fails.
func TestProbeWaitsForAStartingResolver(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	go func() {
		time.Sleep(300 * time.Millisecond)
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return
		}
		defer pc.Close()
		buf := make([]byte, 512)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		buf[2] |= 0x80
		pc.WriteTo(buf[:n], from)
	}()
	if code := probe([]string{addr}); code != 0 {
		t.Fatalf("probe against a resolver starting 300 ms later: exit %d", code)
	}
}
