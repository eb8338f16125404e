// Package trust is the Trust Anchor: an in-memory CA that lives as long as
// one coordinator run, the short-lived client certificate of the sandbox,
// and the only place in lazaret where a tls.Config is built (server side for
// the coordinator, client side for lazaret-escalate).
//
// Nothing of the CA is ever written to disk: its private key dies with the
// coordinator, so a certificate copied out of a sandbox is worthless after
// the run ends or after its few minutes of lifetime, whichever comes first.
package trust

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
	"net/url"
	"strings"
	"time"
)

// ServerName is the fixed name of the coordinator's server certificate. The
// client verifies the server against it (and against the run's CA only); it
// is never resolved.
const ServerName = "coordinator.lazaret.internal"

// File names inside the TLS directory. BundleFile holds the client
// certificate, its key and the CA certificate in one file (0600), replaced
// atomically on each rotation: lazaret-escalate reads one file instead of
// three (every open is a round trip through gVisor to the host) and never
// sees a certificate of one rotation with the key of another. The three
// single files stay for other readers.
const (
	CAFile        = "ca.pem"
	ClientFile    = "client.pem"
	ClientKeyFile = "client-key.pem"
	BundleFile    = "escalate.pem"
)

// SANScheme and SANHost form the client certificate's URI SAN
// lazaret://sandbox/<profile>/<sandbox_id>.
const (
	SANScheme = "lazaret"
	SANHost   = "sandbox"
)

// SAN returns the URI SAN of the client certificate of sandbox id of profile.
func SAN(profile, sandboxID string) string {
	return SANScheme + "://" + SANHost + "/" + profile + "/" + sandboxID
}

// ParseSAN splits a sandbox URI SAN into profile and sandbox id.
func ParseSAN(u *url.URL) (profile, sandboxID string, err error) {
	if u == nil || u.Scheme != SANScheme || u.Host != SANHost || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("not a lazaret sandbox SAN: %v", u)
	}
	p, id, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if p == "" || id == "" || SAN(p, id) != u.String() {
		return "", "", fmt.Errorf("not a lazaret sandbox SAN: %v", u)
	}
	return p, id, nil
}

// CA is an in-memory certificate authority.
type CA struct {
	cert *x509.Certificate
	der  []byte
	key  crypto.Signer
	now  func() time.Time
}

// NewCA makes a fresh CA valid for validity from now. now may be nil
// (time.Now).
func NewCA(validity time.Duration, now func() time.Time) (*CA, error) {
	if now == nil {
		now = time.Now
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("trust: CA key: %w", err)
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "lazaret run CA"},
		NotBefore:             t.Add(-time.Minute),
		NotAfter:              t.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("trust: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, der: der, key: key, now: now}, nil
}

// CertPEM is the CA certificate in PEM form.
func (c *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der})
}

// Pool is a certificate pool holding this CA only.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

// Issued is a certificate with its key, in PEM and in tls form.
type Issued struct {
	CertPEM []byte
	KeyPEM  []byte
	TLS     tls.Certificate
}

// IssueClient issues a client certificate whose only identity is the URI SAN
// san, valid from notBefore to notAfter. It is exported for the coordinator
// and for tests that need an expired certificate or a foreign SAN.
func (c *CA) IssueClient(san string, notBefore, notAfter time.Time) (*Issued, error) {
	u, err := url.Parse(san)
	if err != nil {
		return nil, fmt.Errorf("trust: SAN %q: %w", san, err)
	}
	return c.issue(&x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "lazaret sandbox"},
		URIs:         []*url.URL{u},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// IssueServer issues the coordinator's server certificate for ServerName.
func (c *CA) IssueServer(notBefore, notAfter time.Time) (*Issued, error) {
	return c.issue(&x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: ServerName},
		DNSNames:     []string{ServerName},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

func (c *CA) issue(tmpl *x509.Certificate) (*Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("trust: key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	if err != nil {
		return nil, fmt.Errorf("trust: certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	tc, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &Issued{CertPEM: certPEM, KeyPEM: keyPEM, TLS: tc}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

// ErrPeer is wrapped by every rejection of the client's certificate made in
// VerifyConnection.
var ErrPeer = errors.New("client certificate rejected")

// ServerConfig returns the coordinator's server configuration: TLS 1.3 only,
// a client certificate required and verified against this CA only, whose
// single URI SAN must be exactly wantSAN and whose extended key usage must
// include client authentication; no session tickets (no resumption, so
// every connection presents and verifies a current certificate).
func (c *CA) ServerConfig(server *Issued, wantSAN string) *tls.Config {
	pool := c.Pool()
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{server.TLS},
		ClientAuth:             tls.RequireAndVerifyClientCert,
		ClientCAs:              pool,
		SessionTicketsDisabled: true,
		Time:                   c.now,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return checkPeer(cs, wantSAN)
		},
	}
}

func checkPeer(cs tls.ConnectionState, wantSAN string) error {
	if cs.Version != tls.VersionTLS13 {
		return fmt.Errorf("%w: TLS version %#x", ErrPeer, cs.Version)
	}
	if len(cs.PeerCertificates) == 0 || len(cs.VerifiedChains) == 0 {
		return fmt.Errorf("%w: no verified certificate", ErrPeer)
	}
	leaf := cs.PeerCertificates[0]
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != wantSAN {
		return fmt.Errorf("%w: SAN %v, want %s", ErrPeer, leaf.URIs, wantSAN)
	}
	if len(leaf.DNSNames) != 0 || len(leaf.EmailAddresses) != 0 || len(leaf.IPAddresses) != 0 {
		return fmt.Errorf("%w: unexpected extra SANs", ErrPeer)
	}
	for _, u := range leaf.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth {
			return nil
		}
	}
	return fmt.Errorf("%w: no client-auth key usage", ErrPeer)
}

// PeerSAN returns the URI SAN of the verified peer of cs, or "".
func PeerSAN(cs tls.ConnectionState) string {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 || len(cs.PeerCertificates[0].URIs) != 1 {
		return ""
	}
	return cs.PeerCertificates[0].URIs[0].String()
}
