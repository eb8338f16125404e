package trust

import (
	"crypto/tls"
	"time"
)

// Memory is a Trust Anchor that writes no file: the Kubernetes backend's,
// one per lazaret-kube session, whose client bundles travel to the
// sandbox over the API server's exec stream (the session's escalation
// relay writes them there). The CA lives only in this process's memory,
// like the coordinator's.
type Memory struct {
	ca       *CA
	server   *Issued
	san      string
	lifetime time.Duration
}

// NewMemory makes the CA and server certificate of one session of
// profile's sandbox sandboxID.
func NewMemory(profile, sandboxID string) (*Memory, error) {
	ca, err := NewCA(30*24*time.Hour, time.Now)
	if err != nil {
		return nil, err
	}
	t := time.Now()
	server, err := ca.IssueServer(t.Add(-time.Minute), t.Add(30*24*time.Hour))
	if err != nil {
		return nil, err
	}
	return &Memory{ca: ca, server: server, san: SAN(profile, sandboxID), lifetime: DefaultLifetime}, nil
}

// ServerConfig is the escalation server's tls.Config.
func (m *Memory) ServerConfig() *tls.Config { return m.ca.ServerConfig(m.server, m.san) }

// Lifetime is how long a client bundle is valid; send a new one at half
// of it.
func (m *Memory) Lifetime() time.Duration { return m.lifetime }

// ClientBundle issues a fresh client certificate and returns the content
// of BundleFile (certificate, its key, the CA): it holds a private key,
// so it goes only to the sandbox's TLS directory.
func (m *Memory) ClientBundle() ([]byte, error) {
	t := time.Now()
	iss, err := m.ca.IssueClient(m.san, t.Add(-30*time.Second), t.Add(m.lifetime))
	if err != nil {
		return nil, err
	}
	return bundle(iss, m.ca.CertPEM()), nil
}
