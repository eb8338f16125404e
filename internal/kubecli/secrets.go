package kubecli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/netdpod"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/engine/secretfetch"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// labelSecretsConfig, on a sidecar's ConfigMap and Secret, is the hash of
// the profile's secret configuration (names, hosts, header, format,
// variables; never a value): a later start of the same configuration
// finds them by it and reuses their placeholders and CA.
const labelSecretsConfig = "lazaret.dev/secrets-config"

// caReuseMargin: a CA with less lifetime left is not reused (a new one,
// new placeholders, a new template).
const caReuseMargin = secret.CALifetime / 4

// podSecrets are a profile's secrets as its cluster sandboxes get them:
// the values fetched on the host at this start, the placeholders and CA
// of the template (reused while the configuration stays the same), the
// roots netd verifies the real hosts with.
type podSecrets struct {
	list   []secret.Secret
	env    map[string]string // secret name → the agent's variable
	config string            // labelSecretsConfig's value
	ca     *secret.CA
	caKey  []byte
	roots  []byte
	reused string // the ConfigMap whose placeholders and CA are reused
}

// secretIdentity is what the sidecar's ConfigMap name is made of besides
// the policy (kubespec.Input.SidecarIdentity): stable while the
// placeholders and CA are reused, new when they rotate.
type secretIdentity struct {
	Config       string
	Placeholders []string
	CA           string
}

func (s *podSecrets) identity() any {
	if s == nil {
		return nil
	}
	id := secretIdentity{Config: s.config}
	for _, sec := range s.list {
		id.Placeholders = append(id.Placeholders, sec.Placeholder)
	}
	sum := sha256.Sum256(s.ca.CertPEM)
	id.CA = hex.EncodeToString(sum[:])
	return id
}

// prepareSecrets makes f (values just fetched on the host) ready for p's
// template: the placeholders and CA of an earlier start with the same
// configuration when its ConfigMap and Secret are still there and the CA
// has time left, else f's fresh placeholders and a new CA limited to the
// secrets' hosts. An attempt (`lazaret fork`; attempt is its Domain
// Anchor, "" otherwise) reuses only its own: attempts never share a
// placeholder or an interception CA with their parent or each other.
func prepareSecrets(ctx context.Context, c *kube.Client, p *config.Profile, attempt string, f *secretfetch.Fetched) (*podSecrets, error) {
	if f == nil {
		return nil, nil
	}
	roots, err := secretfetch.UpstreamRoots(&p.CABundle)
	if err != nil {
		return nil, err
	}
	s := &podSecrets{list: slices.Clone(f.List), env: map[string]string{}, roots: roots, config: secretsConfigHash(f, attempt)}
	for i, sec := range f.List {
		s.env[sec.Name] = f.EnvVars[i]
	}
	if err := s.reuse(ctx, c, p.Name); err != nil {
		return nil, err
	}
	if s.ca == nil {
		if s.ca, err = secret.NewCA(f.Hosts(), time.Now()); err != nil {
			return nil, err
		}
	}
	if s.caKey, err = s.ca.KeyDER(); err != nil {
		return nil, err
	}
	return s, nil
}

// secretsConfigHash hashes what the agent's view and netd's behaviour
// depend on, and an attempt's Domain Anchor: never a value, never a
// placeholder.
func secretsConfigHash(f *secretfetch.Fetched, attempt string) string {
	type entry struct {
		Name, Header, Format, Env string
		Hosts                     []string
	}
	var es []entry
	for i, s := range f.List {
		es = append(es, entry{s.Name, s.Header, s.Format, f.EnvVars[i], s.Hosts})
	}
	b, _ := json.Marshal(es)
	if attempt != "" {
		b = append(b, "\x00attempt\x00"+attempt...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// reuse takes the placeholders and CA of the newest ConfigMap of profile
// with s's configuration whose Secret still holds the CA key. Nothing
// found is not an error: s keeps its fresh placeholders.
func (s *podSecrets) reuse(ctx context.Context, c *kube.Client, profile string) error {
	cms, err := c.ConfigMaps(ctx, kubespec.ManagedSelector+","+kubespec.LabelProfile+"="+profile+","+labelSecretsConfig+"="+s.config)
	if err != nil {
		return err
	}
	sort.Slice(cms, func(i, j int) bool { return cms[j].CreationTimestamp.Before(&cms[i].CreationTimestamp) })
	for _, cm := range cms {
		var stored []secret.Secret
		if json.Unmarshal([]byte(cm.Data[netdapi.PodSecretsFile]), &stored) != nil || !sameSecrets(stored, s.list) {
			continue
		}
		data, err := c.SecretData(ctx, netdpod.SecretName(cm.Name))
		if err != nil {
			continue // gone (purged) or unreadable: rotate
		}
		ca, err := secret.ParseCA([]byte(cm.Data[netdapi.PodCACertFile]), data[netdapi.PodCAKeyFile])
		if err != nil || time.Until(ca.Cert.NotAfter) < caReuseMargin {
			continue
		}
		for i := range s.list {
			s.list[i].Placeholder = stored[i].Placeholder
		}
		s.ca, s.reused = ca, cm.Name
		return nil
	}
	return nil
}

// sameSecrets: stored (a ConfigMap's secrets, without values) describes
// the same secrets as cur, each with a placeholder of the usual form.
func sameSecrets(stored, cur []secret.Secret) bool {
	if len(stored) != len(cur) {
		return false
	}
	for i, s := range stored {
		c := cur[i]
		if s.Name != c.Name || s.Header != c.Header || s.Format != c.Format || !slices.Equal(s.Hosts, c.Hosts) ||
			s.Value != "" || !validPlaceholder(s.Placeholder) {
			return false
		}
	}
	return true
}

// validPlaceholder: a placeholder read back from the cluster has the form
// secretfetch makes (anyone who can write the ConfigMap could put
// anything there; it goes into the agent's environment and netd's
// matching).
func validPlaceholder(p string) bool {
	hexPart, ok := strings.CutPrefix(p, secretfetch.PlaceholderPrefix)
	if !ok || len(hexPart) != 32 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil && strings.ToLower(hexPart) == hexPart
}

// options puts s into o (netd's pod options).
func (s *podSecrets) options(o *netdpod.Options) {
	o.Secrets, o.SecretEnv = s.list, s.env
	o.CACert, o.CAKey, o.Roots = s.ca.CertPEM, s.caKey, s.roots
}
