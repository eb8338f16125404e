package trust

import (
	"crypto/tls"
	"crypto/x509"
)

// InterceptServerConfig is the configuration of netd's secret injector
// towards the agent: leaf certificates of the sandbox's own interception
// CA (certificate picks one per server name and refuses any name that is
// not a secret's host), HTTP/2 or HTTP/1.1. TLS 1.2 is accepted because
// agent clients (Node, Python, curl) negotiate what they were built with;
// the CA is trusted only inside that sandbox.
func InterceptServerConfig(certificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		GetCertificate: certificate,
		NextProtos:     []string{"h2", "http/1.1"},
		MinVersion:     tls.VersionTLS12,
	}
}

// UpstreamClientConfig is the configuration of netd's connection to a
// secret's real host: verified against roots (the host's trust store plus
// the profile's ca_bundle) under the name the agent asked for, or under
// serverName when it is set (tests whose upstream has a fixed name).
func UpstreamClientConfig(roots *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, ServerName: serverName}
}
