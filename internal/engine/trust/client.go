package trust

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
)

// ErrNoTLSMaterial is wrapped when the TLS directory or a file in it is
// missing or unreadable.
var ErrNoTLSMaterial = errors.New("TLS material missing")

// ClientConfig reads the TLS directory dir and returns the escalation
// client's configuration: TLS 1.3, the client certificate of the directory,
// the server verified against the run's CA only under ServerName. It reads
// the bundle (one file, see BundleFile) and falls back to ca.pem,
// client.pem and client-key.pem when a directory has no bundle.
func ClientConfig(dir string) (*tls.Config, *x509.Certificate, error) {
	data, err := readSmall(filepath.Join(dir, BundleFile))
	switch {
	case err == nil:
		pool, cert, err := parseBundle(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", ErrNoTLSMaterial, filepath.Join(dir, BundleFile), err)
		}
		return ClientConfigFor(pool, cert), cert.Leaf, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("%w: %w", ErrNoTLSMaterial, err)
	}
	caPEM, err := readSmall(filepath.Join(dir, CAFile))
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

// bundle returns the content of BundleFile: the client certificate, its
// key and the CA certificate, PEM blocks in this order.
func bundle(iss *Issued, caPEM []byte) []byte {
	b := make([]byte, 0, len(iss.CertPEM)+len(iss.KeyPEM)+len(caPEM))
	b = append(b, iss.CertPEM...)
	b = append(b, iss.KeyPEM...)
	return append(b, caPEM...)
}

// parseBundle splits a bundle into the CA pool and the client key pair.
func parseBundle(data []byte) (*x509.CertPool, tls.Certificate, error) {
	var parts [3][]byte
	want := [3]string{"CERTIFICATE", "PRIVATE KEY", "CERTIFICATE"}
	rest := data
	for i := range parts {
		var b *pem.Block
		b, next := pem.Decode(rest)
		if b == nil || b.Type != want[i] {
			return nil, tls.Certificate{}, fmt.Errorf("PEM block %d is not a %s", i+1, want[i])
		}
		parts[i] = rest[:len(rest)-len(next)]
		rest = next
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, tls.Certificate{}, errors.New("trailing data after the CA certificate")
	}
	cert, err := tls.X509KeyPair(parts[0], parts[1])
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(parts[2]) {
		return nil, tls.Certificate{}, errors.New("no CA certificate")
	}
	return pool, cert, nil
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

// maxPEM bounds what readSmall reads: the PEM files are well under 4 KiB.
const maxPEM = 64 << 10

// readSmall reads a small file with plain open/read/close. os.ReadFile
// would also fstat it and try to register it with the netpoller (fcntl,
// epoll_ctl, fcntl): five more system calls per file, each a trap into
// the Sentry inside gVisor, where this runs on every escalation.
func readSmall(path string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) > maxPEM {
			return nil, &fs.PathError{Op: "read", Path: path, Err: errors.New("file too large")}
		}
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// loadPair loads client.pem and client-key.pem. A rotation replaces the key
// first and the certificate second; reading between the two renames gives
// a mismatched pair, so a mismatch is retried a few times.
func loadPair(dir string) (tls.Certificate, error) {
	var lastErr error
	for i := 0; i < 5; i++ {
		certPEM, err := readSmall(filepath.Join(dir, ClientFile))
		var keyPEM []byte
		if err == nil {
			keyPEM, err = readSmall(filepath.Join(dir, ClientKeyFile))
		}
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("%w: %w", ErrNoTLSMaterial, err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err == nil {
			return cert, nil
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	return tls.Certificate{}, fmt.Errorf("%w: %w", ErrNoTLSMaterial, lastErr)
}
