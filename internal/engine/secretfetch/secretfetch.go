// Package secretfetch reads a profile's secret values on the host and
// gives each a random placeholder, and finds the trust store the
// injector verifies the secrets' hosts with. Both backends use it: the
// local coordinator (internal/coordinator/sidecar) and the Kubernetes
// backend (internal/kubecli), which may not link the coordinator.
package secretfetch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/lazaret-dev/lazaret/internal/cabundle"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
)

// PlaceholderPrefix starts every placeholder (lower-case hex follows, so
// that a DNS name carrying one is recognised whatever its case).
const PlaceholderPrefix = "lzph-"

// Fetched are a profile's secrets with their values and fresh
// placeholders: List[i] comes from Sources[i] and the agent sees its
// placeholder as EnvVars[i].
type Fetched struct {
	List    []secret.Secret
	EnvVars []string
	Sources []*config.Secret
}

// Fetch reads the value of every secret of p (nil without secrets). A
// source that fails is an error naming the file, line and key. A value
// read from a host variable is removed from this process's environment,
// so that no child inherits it.
func Fetch(ctx context.Context, p *config.Profile) (*Fetched, error) {
	if len(p.Secrets) == 0 {
		return nil, nil
	}
	f := &Fetched{}
	for _, ps := range p.Secrets {
		v, err := Value(ctx, ps.Secret)
		if err != nil {
			return nil, err
		}
		ph, err := NewPlaceholder()
		if err != nil {
			return nil, err
		}
		f.List = append(f.List, secret.Secret{Name: ps.Secret.Name, Hosts: ps.Secret.Hosts,
			Header: ps.Secret.Header, Format: ps.Secret.Format, Placeholder: ph, Value: v})
		f.EnvVars = append(f.EnvVars, ps.EnvVar)
		f.Sources = append(f.Sources, ps.Secret)
	}
	TakeSources(p)
	return f, nil
}

// NewPlaceholder is a fresh random placeholder.
func NewPlaceholder() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return PlaceholderPrefix + hex.EncodeToString(b), nil
}

// Hosts are the host patterns of every secret of f, for the CA's name
// constraints.
func (f *Fetched) Hosts() []string {
	var hosts []string
	for _, s := range f.List {
		hosts = append(hosts, s.Hosts...)
	}
	return hosts
}

// UpstreamRoots are the certificates the injector verifies upstream
// servers with: the host's trust store and the profile's CA bundle (a
// TLS-intercepting proxy's CA is there).
func UpstreamRoots(ca *config.CABundle) ([]byte, error) {
	var out []byte
	for _, path := range []string{config.DefaultCABundle, ca.Path} {
		if path == "" || (path == config.DefaultCABundle && len(out) > 0) {
			continue
		}
		pemData, _, err := cabundle.Load(path)
		if err != nil {
			if path == config.DefaultCABundle {
				continue
			}
			return nil, ca.Locate(err)
		}
		out = append(out, pemData...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("secrets: no trust store to verify the secrets' hosts with (neither %s nor a ca_bundle)", config.DefaultCABundle)
	}
	return out, nil
}
