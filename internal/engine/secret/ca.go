package secret

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// CA is a sandbox's interception CA, made in memory when the sandbox
// starts. Its name constraints limit it to the secrets' hosts: even a
// leaked key cannot vouch for any other name, nor for an IP address.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM is what the sandbox's trust store gets.
	CertPEM []byte
}

// CALifetime bounds a CA (a sandbox running longer keeps working: the
// leaves are minted per host by netd within it).
const CALifetime = 30 * 24 * time.Hour

// NewCA makes a CA for hosts (Secret.Hosts patterns).
func NewCA(hosts []string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var permitted []string
	for _, h := range hosts {
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			permitted = append(permitted, "."+suffix) // below suffix only
		} else {
			permitted = append(permitted, h)
		}
	}
	if len(permitted) == 0 {
		return nil, errors.New("interception CA without hosts")
	}
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{CommonName: "lazaret sandbox secret injector"},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(CALifetime),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         permitted,
		ExcludedIPRanges:            []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// KeyDER is the CA key in PKCS #8, for netd's control socket only.
func (c *CA) KeyDER() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(c.Key) }

// ParseCA reads what KeyDER and CertPEM carried.
func ParseCA(certPEM, keyDER []byte) (*CA, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("CA certificate: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, errors.New("CA: not a signing CA key and certificate")
	}
	return &CA{Cert: cert, Key: signer, CertPEM: certPEM}, nil
}

// leafLifetime is how long a minted host certificate is valid; netd mints
// a new one before that.
const leafLifetime = 24 * time.Hour

// Leaf mints the certificate netd shows the agent for host.
func (c *CA) Leaf(host string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(leafLifetime)
	if notAfter.After(c.Cert.NotAfter) {
		notAfter = c.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
