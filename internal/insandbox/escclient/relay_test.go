package escclient

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// TestRelay: the relay writes the bundle (0600) in DIR/tls, listens on
// DIR/sock, carries a connection both ways over its stdin and stdout, and
// removes DIR when its stdin ends.
func TestRelay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "S")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	go func() { exited <- RelayMain([]string{dir}, inR, outW, &stderr); outW.Close() }()
	send := func(f escrelay.Frame) {
		if err := escrelay.Write(inW, f); err != nil {
			t.Error(err)
		}
	}
	read := func() escrelay.Frame {
		f, err := escrelay.Read(outR)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	go send(escrelay.Frame{Type: escrelay.Bundle, Payload: []byte("PEM")})
	if f := read(); f.Type != escrelay.Ready {
		t.Fatalf("first frame %+v, want Ready", f)
	}
	fi, err := os.Stat(filepath.Join(dir, escrelay.TLSDir, trust.BundleFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("bundle: %v %v", fi, err)
	}
	c, err := net.Dial("unix", filepath.Join(dir, escrelay.Socket))
	if err != nil {
		t.Fatal(err)
	}
	open := read()
	if open.Type != escrelay.Open {
		t.Fatalf("%+v, want Open", open)
	}
	_, _ = c.Write([]byte("request"))
	if f := read(); f.Type != escrelay.Data || f.ID != open.ID || string(f.Payload) != "request" {
		t.Fatalf("%+v", f)
	}
	go func() {
		send(escrelay.Frame{Type: escrelay.Data, ID: open.ID, Payload: []byte("answer")})
		send(escrelay.Frame{Type: escrelay.Close, ID: open.ID})
	}()
	got, _ := io.ReadAll(c)
	if string(got) != "answer" {
		t.Fatalf("client read %q", got)
	}
	inW.Close()
	if code := <-exited; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("DIR left behind: %v", err)
	}
}

// TestRelayNeedsBundleFirst: anything but a bundle first is refused.
func TestRelayNeedsBundleFirst(t *testing.T) {
	var in bytes.Buffer
	_ = escrelay.Write(&in, escrelay.Frame{Type: escrelay.Data, ID: 1})
	if code := RelayMain([]string{filepath.Join(t.TempDir(), "S")}, &in, io.Discard, io.Discard); code != ExitFailure {
		t.Fatalf("exit %d", code)
	}
	if code := RelayMain([]string{"relative"}, &in, io.Discard, io.Discard); code != ExitUsage {
		t.Fatalf("relative DIR: exit %d", code)
	}
}

// TestInstall copies the two binaries beside the executable, 0555.
func TestInstall(t *testing.T) {
	self, _ := os.Executable()
	dir := filepath.Dir(self)
	for _, n := range []string{escrelay.FrontEndBinary, escrelay.InstallerBinary} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o755); err != nil {
				t.Skip("cannot place the binaries beside the test:", err)
			}
			defer os.Remove(filepath.Join(dir, n))
		}
	}
	out := t.TempDir()
	if code := InstallMain([]string{out}, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, n := range []string{escrelay.FrontEndBinary, escrelay.InstallerBinary} {
		fi, err := os.Stat(filepath.Join(out, n))
		if err != nil || fi.Mode().Perm() != 0o555 {
			t.Errorf("%s: %v %v", n, fi, err)
		}
	}
}
