package cabundle

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testCert(t testing.TB) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestFilterKeepsCertificatesOnly(t *testing.T) {
	c := testCert(t)
	in := append([]byte("# comment\n"), c...)
	in = append(in, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: []byte{1, 2}})...)
	in = append(in, "trailing text\n"...)
	in = append(in, c...)
	out, n, err := Filter(in)
	if err != nil || n != 2 {
		t.Fatalf("Filter: n=%d err=%v", n, err)
	}
	if !bytes.Equal(out, append(append([]byte{}, c...), c...)) {
		t.Fatalf("unexpected output:\n%s", out)
	}
}

func TestFilterRefuses(t *testing.T) {
	c := testCert(t)
	for name, in := range map[string][]byte{
		"empty":   nil,
		"text":    []byte("hello\n"),
		"key":     append(append([]byte{}, c...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}})...),
		"pkcs8":   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}),
		"crlOnly": pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: []byte{1}}),
	} {
		if _, _, err := Filter(in); !errors.Is(err, ErrNotBundle) {
			t.Errorf("%s: err = %v, want ErrNotBundle", name, err)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, testCert(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, n, err := Load(good); err != nil || n != 1 {
		t.Fatalf("Load: n=%d err=%v", n, err)
	}
	if _, _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load(dir) = %v", err)
	}
	if _, _, err := Load(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Errorf("Load(big) = %v", err)
	}
}

// FuzzFilter: the output of Filter is always certificates only, and
// filtering it again is the identity.
func FuzzFilter(f *testing.F) {
	f.Add(testCert(f))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, n, err := Filter(data)
		if err != nil {
			return
		}
		again, m, err := Filter(out)
		if err != nil || m != n || !bytes.Equal(again, out) {
			t.Fatalf("refilter: n=%d m=%d err=%v", n, m, err)
		}
		for rest := out; ; {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				if len(bytes.TrimSpace(rest)) != 0 {
					t.Fatalf("garbage after blocks: %q", rest)
				}
				break
			}
			if b.Type != "CERTIFICATE" || len(b.Headers) != 0 {
				t.Fatalf("block %q with headers %v in output", b.Type, b.Headers)
			}
		}
	})
}
