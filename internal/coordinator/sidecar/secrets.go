package sidecar

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/engine/secretfetch"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// Secrets are a profile's secrets with their values, read once at the
// coordinator's start and kept only in its memory and netd's (sent over
// the control socket). The agent gets a random placeholder per secret.
type Secrets struct {
	list    []secret.Secret
	envVars []string         // the variable of list[i] in the sandbox
	sources []*config.Secret // where list[i] comes from (refresh)
}

// PlaceholderPrefix starts every placeholder.
const PlaceholderPrefix = secretfetch.PlaceholderPrefix

// FetchSecrets reads the value of every secret of p (secretfetch.Fetch).
// A source that fails is an error naming the file, line and key; nothing
// has started then.
func FetchSecrets(ctx context.Context, p *config.Profile) (*Secrets, error) {
	f, err := secretfetch.Fetch(ctx, p)
	if err != nil || f == nil {
		return nil, err
	}
	return &Secrets{list: f.List, envVars: f.EnvVars, sources: f.Sources}, nil
}

// WithSecrets makes the sidecar inject s (nil: none).
func (c *Component) WithSecrets(s *Secrets) *Component {
	c.secrets = s
	return c
}

// InjectBundlePath is the sandbox's trust store while secrets are
// injected: the profile's CA bundle plus the sandbox's interception CA.
const InjectBundlePath = "/run/lazaret/ca-inject.crt"

// prepareSecrets makes the sandbox's CA, the trust store the agent gets
// (mounted read-only, the CA variables pointed at it) and the
// placeholders' variables. The CA key stays in memory until netd has it.
func (c *Component) prepareSecrets(spec *podman.ContainerSpec, ca *config.CABundle) error {
	authority, err := secret.NewCA((&secretfetch.Fetched{List: c.secrets.list}).Hosts(), time.Now())
	if err != nil {
		return err
	}
	roots, err := secretfetch.UpstreamRoots(ca)
	if err != nil {
		return err
	}
	c.ca, c.roots = authority, roots
	// The agent's clients trust what they trusted (the profile's bundle)
	// and the sandbox CA, which can vouch only for the secrets' hosts.
	bundle := append(append(bytes.Clone(roots), '\n'), authority.CertPEM...)
	file := c.o.Anchor.InjectBundle()
	if err := sandbox.WriteFileAtomic(file, bundle, 0o644); err != nil {
		return fmt.Errorf("secrets: trust store: %w", err)
	}
	spec.Mounts = append(spec.Mounts, podman.Mount{Type: "bind", Source: file, Target: InjectBundlePath, ReadOnly: true})
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	for _, k := range sandbox.CAEnv {
		if v, set := spec.Env[k]; !set || v == sandbox.CABundlePath {
			spec.Env[k] = InjectBundlePath
		}
	}
	for i, s := range c.secrets.list {
		spec.Env[c.secrets.envVars[i]] = s.Placeholder
	}
	return nil
}

// sendSecrets hands netd the secrets, the CA and the roots, then forgets
// the CA key; the values stay for the refreshes.
func (c *Component) sendSecrets(ctx context.Context) error {
	if c.secrets == nil {
		return nil
	}
	key, err := c.ca.KeyDER()
	if err != nil {
		return err
	}
	cl := &netdapi.Client{Socket: c.o.Anchor.NetdSocket(), Timeout: 10 * time.Second}
	err = cl.SetSecrets(ctx, c.secrets.list, c.ca.CertPEM, key, c.roots)
	clear(key)
	c.ca.Key = nil
	if err != nil {
		return fmt.Errorf("%w: secrets: %w", ErrSidecarFailed, err)
	}
	go c.refreshLoop(cl)
	return nil
}

// refreshLoop runs each command source again every refresh period and
// sends netd the new value; a failure is logged (without the value) and
// the old value kept until the next try.
func (c *Component) refreshLoop(cl *netdapi.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-c.closing; cancel() }()
	secretfetch.Refresh(ctx, c.secrets.sources, func(ctx context.Context, i int, v string) error {
		return cl.SetSecretValue(ctx, c.secrets.list[i].Name, v)
	}, func(name string, err error) {
		c.o.Log.Error("refreshing a secret", "secret", name, "err", err)
	})
}
