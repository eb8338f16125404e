package trust

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// handshake runs one TLS 1.3 handshake between server and client configs
// over an in-memory pipe and returns the server side's error.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cerr := make(chan error, 1)
	go func() {
		c := tls.Client(b, client)
		err := c.Handshake()
		if err == nil {
			// TLS 1.3 client certificates are verified after the client's
			// Finished; read to learn the server's verdict.
			_, err = c.Read(make([]byte, 1))
		}
		cerr <- err
		b.Close()
	}()
	s := tls.Server(a, server)
	err := s.Handshake()
	if err == nil {
		_, _ = s.Write([]byte{1})
	}
	a.Close()
	<-cerr
	return err
}

func startAnchor(t *testing.T) *Anchor {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls-abc")
	a, err := Start(Options{Dir: dir, Profile: "claude", SandboxID: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func TestClientConfigFromDirHandshakes(t *testing.T) {
	a := startAnchor(t)
	cfg, leaf, err := ClientConfig(a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got := leaf.URIs[0].String(); got != "lazaret://sandbox/claude/abc123" {
		t.Fatalf("SAN %s", got)
	}
	if err := handshake(t, a.ServerConfig(), cfg); err != nil {
		t.Fatalf("valid client rejected: %v", err)
	}
}

func TestDirLayoutAndModes(t *testing.T) {
	a := startAnchor(t)
	fi, err := os.Stat(a.Dir())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v %v", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(a.Dir())
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{BundleFile, CAFile, ClientKeyFile, ClientFile}; !slices.Equal(sorted(names), sorted(want)) {
		t.Fatalf("TLS dir holds %v, want exactly %v", names, want)
	}
	for _, f := range []string{ClientKeyFile, BundleFile} {
		ki, _ := os.Stat(filepath.Join(a.Dir(), f))
		if ki.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v", f, ki.Mode())
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Dir()); !os.IsNotExist(err) {
		t.Fatalf("TLS dir left behind: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

// TestRejectsForeignCA: a certificate with the right SAN from another CA is
// refused; the positive control shows the same certificate passes a server
// that trusts that other CA.
func TestRejectsForeignCA(t *testing.T) {
	a := startAnchor(t)
	other, _ := NewCA(time.Hour, nil)
	now := time.Now()
	iss, err := other.IssueClient(a.SAN(), now.Add(-time.Minute), now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	client := ClientConfigFor(a.CA().Pool(), iss.TLS)
	if err := handshake(t, a.ServerConfig(), client); err == nil {
		t.Fatal("certificate of another CA accepted")
	}
	otherServer, _ := other.IssueServer(now.Add(-time.Minute), now.Add(time.Hour))
	control := ClientConfigFor(other.Pool(), iss.TLS)
	if err := handshake(t, other.ServerConfig(otherServer, a.SAN()), control); err != nil {
		t.Fatalf("positive control failed: %v", err)
	}
}

func TestRejectsOtherSandboxSAN(t *testing.T) {
	a := startAnchor(t)
	now := time.Now()
	other := SAN("claude", "fff000")
	iss, _ := a.CA().IssueClient(other, now.Add(-time.Minute), now.Add(time.Minute))
	client := ClientConfigFor(a.CA().Pool(), iss.TLS)
	if err := handshake(t, a.ServerConfig(), client); err == nil {
		t.Fatal("certificate of another sandbox accepted")
	}
	if err := handshake(t, a.CA().ServerConfig(a.server, other), client); err != nil {
		t.Fatalf("positive control failed: %v", err)
	}
}

func TestRejectsExpiredCert(t *testing.T) {
	now := time.Now()
	ca, err := NewCA(2*time.Hour, func() time.Time { return now.Add(-time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	ca.now = time.Now
	srv, _ := ca.IssueServer(now.Add(-time.Hour), now.Add(time.Hour))
	san := SAN("claude", "abc")
	iss, _ := ca.IssueClient(san, now.Add(-20*time.Minute), now.Add(-10*time.Minute))
	client := ClientConfigFor(ca.Pool(), iss.TLS)
	if err := handshake(t, ca.ServerConfig(srv, san), client); err == nil {
		t.Fatal("expired certificate accepted")
	}
	// Control: the same certificate at a time inside its validity passes.
	cfg := ca.ServerConfig(srv, san)
	cfg.Time = func() time.Time { return now.Add(-15 * time.Minute) }
	if err := handshake(t, cfg, client); err != nil {
		t.Fatalf("positive control failed: %v", err)
	}
}

func TestRejectsServerUsageCert(t *testing.T) {
	a := startAnchor(t)
	now := time.Now()
	// A server certificate of the same CA is not a client certificate.
	srv, _ := a.CA().IssueServer(now.Add(-time.Minute), now.Add(time.Minute))
	if err := handshake(t, a.ServerConfig(), ClientConfigFor(a.CA().Pool(), srv.TLS)); err == nil {
		t.Fatal("server-usage certificate accepted as client")
	}
}

func TestRejectsNoClientCert(t *testing.T) {
	a := startAnchor(t)
	client := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: a.CA().Pool(), ServerName: ServerName}
	if err := handshake(t, a.ServerConfig(), client); err == nil {
		t.Fatal("connection without a client certificate accepted")
	}
}

func TestServerConfigIsStrict(t *testing.T) {
	a := startAnchor(t)
	c := a.ServerConfig()
	if c.MinVersion != tls.VersionTLS13 || c.ClientAuth != tls.RequireAndVerifyClientCert || !c.SessionTicketsDisabled || c.VerifyConnection == nil {
		t.Fatalf("server config not strict: %+v", c)
	}
	if !c.ClientCAs.Equal(a.CA().Pool()) {
		t.Fatal("client CA pool must hold exactly this run's CA")
	}
}

func TestRotationReplacesFiles(t *testing.T) {
	a := startAnchor(t)
	before, _ := os.ReadFile(filepath.Join(a.Dir(), ClientFile))
	beforeBundle, _ := os.ReadFile(filepath.Join(a.Dir(), BundleFile))
	if err := a.Rotate(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(a.Dir(), ClientFile))
	if bytes.Equal(before, after) {
		t.Fatal("rotation did not replace client.pem")
	}
	afterBundle, _ := os.ReadFile(filepath.Join(a.Dir(), BundleFile))
	if bytes.Equal(beforeBundle, afterBundle) || !bytes.HasPrefix(afterBundle, after) {
		t.Fatal("rotation did not replace the bundle with the new certificate")
	}
	cfg, _, err := ClientConfig(a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, a.ServerConfig(), cfg); err != nil {
		t.Fatalf("rotated certificate rejected: %v", err)
	}
	ents, _ := os.ReadDir(a.Dir())
	if len(ents) != 4 {
		t.Fatalf("temporary files left: %d entries", len(ents))
	}
}

func TestRotationLoopRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	a, err := Start(Options{Dir: dir, Profile: "p1", SandboxID: "x", Lifetime: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	first, _ := os.ReadFile(filepath.Join(dir, ClientFile))
	for i := 0; ; i++ {
		cur, _ := os.ReadFile(filepath.Join(dir, ClientFile))
		if !bytes.Equal(first, cur) {
			break
		}
		if i > 500 {
			t.Fatal("certificate never rotated")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClientConfigMissing(t *testing.T) {
	_, _, err := ClientConfig(t.TempDir())
	if !errors.Is(err, ErrNoTLSMaterial) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want TLS material missing (not exist)", err)
	}
	// A directory with the CA but no key pair.
	a := startAnchor(t)
	dir := t.TempDir()
	ca, err := os.ReadFile(filepath.Join(a.Dir(), CAFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, CAFile), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ClientConfig(dir); !errors.Is(err, ErrNoTLSMaterial) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want TLS material missing (not exist)", err)
	}
}

func TestReadSmall(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("0123456789abcdef"), 700) // more than one read buffer
	if err := os.WriteFile(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readSmall(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readSmall: %d bytes, %v", len(got), err)
	}
	if err := os.WriteFile(p, make([]byte, maxPEM+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readSmall(p); err == nil {
		t.Fatal("readSmall accepted a file over maxPEM")
	}
}

func TestParseSAN(t *testing.T) {
	u, _ := url.Parse(SAN("claude", "abc"))
	p, id, err := ParseSAN(u)
	if err != nil || p != "claude" || id != "abc" {
		t.Fatalf("%q %q %v", p, id, err)
	}
	for _, s := range []string{"https://sandbox/a/b", "lazaret://x/a/b", "lazaret://sandbox/a", "lazaret://sandbox/a/b?x=1", "lazaret://sandbox//b"} {
		u, _ := url.Parse(s)
		if _, _, err := ParseSAN(u); err == nil {
			t.Errorf("ParseSAN(%s) accepted", s)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestClientConfigWithoutBundle: a directory with only the three single
// files (written by an older coordinator) still works.
func TestClientConfigWithoutBundle(t *testing.T) {
	a := startAnchor(t)
	if err := os.Remove(filepath.Join(a.Dir(), BundleFile)); err != nil {
		t.Fatal(err)
	}
	cfg, leaf, err := ClientConfig(a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != a.SAN() {
		t.Fatalf("leaf SAN %v", leaf.URIs)
	}
	if err := handshake(t, a.ServerConfig(), cfg); err != nil {
		t.Fatal(err)
	}
}

// TestBundleIsStrict: the bundle must be exactly certificate, key, CA.
func TestBundleIsStrict(t *testing.T) {
	a := startAnchor(t)
	good, err := os.ReadFile(filepath.Join(a.Dir(), BundleFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := parseBundle(good); err != nil {
		t.Fatalf("good bundle: %v", err)
	}
	cert, _ := os.ReadFile(filepath.Join(a.Dir(), ClientFile))
	key, _ := os.ReadFile(filepath.Join(a.Dir(), ClientKeyFile))
	ca, _ := os.ReadFile(filepath.Join(a.Dir(), CAFile))
	other := startAnchor(t)
	otherKey, _ := os.ReadFile(filepath.Join(other.Dir(), ClientKeyFile))
	for name, b := range map[string][]byte{
		"key first":        append(append(slices.Clone(key), cert...), ca...),
		"no CA":            append(slices.Clone(cert), key...),
		"trailing block":   append(slices.Clone(good), ca...),
		"mismatched key":   append(append(slices.Clone(cert), otherKey...), ca...),
		"empty":            nil,
		"garbage":          []byte("not pem"),
		"certificate only": slices.Clone(cert),
	} {
		if _, _, err := parseBundle(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A bundle that does not parse is an error, not a fallback.
	if err := os.WriteFile(filepath.Join(a.Dir(), BundleFile), []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ClientConfig(a.Dir()); !errors.Is(err, ErrNoTLSMaterial) {
		t.Fatalf("broken bundle: %v", err)
	}
}
