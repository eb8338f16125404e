package trust

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ErrNoTLSMaterial is wrapped when the TLS directory or a file in it is
// missing or unreadable.
var ErrNoTLSMaterial = errors.New("TLS material missing")

// ClientConfig reads the TLS directory dir and returns the escalation
// client's configuration: TLS 1.3, the client certificate of the directory,
// the server verified against ca.pem only under ServerName.
func ClientConfig(dir string) (*tls.Config, *x509.Certificate, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNoTLSMaterial, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("%w: %s holds no certificate", ErrNoTLSMaterial, filepath.Join(dir, CAFile))
	}
	cert, err := loadPair(dir)
	if err != nil {
		return nil, nil, err
	}
	return ClientConfigFor(pool, cert), cert.Leaf, nil
}

// ClientConfigFor builds the client configuration from a CA pool and a
// client certificate (tests use it with crafted certificates).
func ClientConfigFor(pool *x509.CertPool, cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		RootCAs:                pool,
		ServerName:             ServerName,
		Certificates:           []tls.Certificate{cert},
		SessionTicketsDisabled: true,
	}
}

// loadPair loads client.pem and client-key.pem. A rotation replaces the key
// first and the certificate second; reading between the two renames gives
// a mismatched pair, so a mismatch is retried a few times.
func loadPair(dir string) (tls.Certificate, error) {
	var lastErr error
	for i := 0; i < 5; i++ {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, ClientFile), filepath.Join(dir, ClientKeyFile))
		if err == nil {
			return cert, nil
		}
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			return tls.Certificate{}, fmt.Errorf("%w: %w", ErrNoTLSMaterial, err)
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	return tls.Certificate{}, fmt.Errorf("%w: %w", ErrNoTLSMaterial, lastErr)
}
