// Package netdpod describes lazaret-netd as a native sidecar of a
// Kubernetes pod (docs/KUBERNETES.md, "Network on Kubernetes"): the
// container, its ConfigMap and Secret, the pod's DNS settings, and the
// NetworkPolicy egress rules of a profile. It is pure (k8s.io/api types
// only, no client) and is used by the Kubernetes backend, never by netd
// itself (netd must not link k8s.io: cmd/lazaret-netd/deps_test.go).
package netdpod

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// ContainerName is the sidecar's container name in the pod.
const ContainerName = "lazaret-netd"

// Volume names in the pod.
const (
	ConfigVolume = "lazaret-netd-config" // the ConfigMap, netd's view
	SecretVolume = "lazaret-netd-secret" // the Secret, netd only
	RunVolume    = "lazaret-netd-run"    // emptyDir, netd only: the control socket
	CAVolume     = "lazaret-netd-ca"     // the ConfigMap's CA bundle, the agent's view
)

// AgentCADir is where the agent container finds the CA bundle (its trust
// store plus the sandbox CA), as PodCABundleFile.
const AgentCADir = "/run/lazaret/ca"

// caEnv are the variables pointing clients at the CA bundle (as locally,
// docs/SECRETS.md).
var caEnv = []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"}

// Options describe one sandbox's sidecar.
type Options struct {
	// Image is the netd image (localhost/lazaret-netd:<content tag> when
	// imported into the node's containerd).
	Image      string
	PullPolicy corev1.PullPolicy
	Policy     netpolicy.Policy
	// Upstreams are the cluster DNS (the kube-dns Service address).
	Upstreams []netip.AddrPort
	// Name is the ConfigMap's name; the Secret is SecretName(Name).
	Name string
	// Client installs the in-pod client from the image into the agent
	// container, read-only (escalate.go): the escalation client and
	// relay, and the terminal keeper of kept sessions, which is needed
	// with escalation off too.
	Client bool

	// Secrets (values and placeholders), with SecretEnv naming the
	// variable under which the agent sees each secret's placeholder
	// (secret name → variable). CACert (PEM) and CAKey (PKCS #8 DER) are
	// the sandbox's interception CA, Roots (PEM) the trust store netd
	// verifies the real hosts with and the agent's bundle starts from.
	Secrets   []secret.Secret
	SecretEnv map[string]string
	CACert    []byte
	CAKey     []byte
	Roots     []byte
}

// Spec is what the backend puts into the pod (and beside it).
type Spec struct {
	// Container is the native sidecar: an init container with restart
	// policy Always, whose exec readiness probe queries the resolver, so
	// the pod (and the claim) is Ready only once netd answers.
	Container corev1.Container
	// ConfigMapData is the ConfigMap named Options.Name: policy, the
	// secrets' hosts and placeholders, the CA certificate and bundle, the
	// roots. Never a secret value nor the CA key.
	ConfigMapData map[string]string
	// SecretData is the Secret named SecretName(Options.Name): the
	// values and the CA key. It is mounted into netd's container only.
	SecretData map[string][]byte
	Volumes    []corev1.Volume
	// DNSPolicy None and DNSConfig: the agent's resolv.conf names netd.
	DNSPolicy corev1.DNSPolicy
	DNSConfig *corev1.PodDNSConfig
	// AgentVolumeMounts and AgentEnv go into the agent container: the CA
	// bundle and the placeholders, nothing else.
	AgentVolumeMounts []corev1.VolumeMount
	AgentEnv          []corev1.EnvVar
	// InitContainers run before the sidecar: the escalation client's
	// installer (Options.Client).
	InitContainers []corev1.Container `json:",omitempty"`
}

// SecretName is the name of the Secret holding a sandbox's values.
func SecretName(name string) string { return name + "-secret" }

// Sidecar describes netd's container and what goes with it.
func Sidecar(o Options) (Spec, error) {
	if o.Image == "" || o.Name == "" {
		return Spec{}, errors.New("netdpod: image and name are required")
	}
	if len(o.Upstreams) == 0 {
		return Spec{}, errors.New("netdpod: no upstream resolver (the cluster DNS address)")
	}
	if err := o.Policy.Validate(); err != nil {
		return Spec{}, fmt.Errorf("netdpod: policy: %w", err)
	}
	pol, err := json.Marshal(o.Policy)
	if err != nil {
		return Spec{}, err
	}
	s := Spec{
		ConfigMapData: map[string]string{netdapi.PodPolicyFile: string(pol)},
		DNSPolicy:     corev1.DNSNone,
		DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"127.0.0.1"},
			Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("1")}},
		},
		Volumes: []corev1.Volume{
			{Name: ConfigVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: o.Name}, DefaultMode: ptr(int32(0o444)),
			}}},
			{Name: RunVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("1Mi")),
			}}},
		},
	}
	args := []string{"--pod",
		"--policy-file", path.Join(netdapi.PodConfigDir, netdapi.PodPolicyFile),
		"--control", path.Join(netdapi.PodRunDir, netdapi.PodControlSocket)}
	for _, u := range o.Upstreams {
		args = append(args, "--upstream", u.String())
	}
	mounts := []corev1.VolumeMount{
		{Name: ConfigVolume, MountPath: netdapi.PodConfigDir, ReadOnly: true},
		{Name: RunVolume, MountPath: netdapi.PodRunDir},
	}
	if len(o.Secrets) > 0 {
		sargs, smounts, err := s.addSecrets(o)
		if err != nil {
			return Spec{}, err
		}
		args = append(args, sargs...)
		mounts = append(mounts, smounts...)
	}
	s.Container = container(o, args, mounts)
	if o.Client {
		s.addEscalation(o)
	}
	return s, nil
}

// container is netd's container: root in the sandbox (port 53 needs
// NET_BIND_SERVICE, which Kubernetes grants a non-root user only as an
// ambient capability it does not set) with every other capability
// dropped, no privilege escalation, a read-only root filesystem.
func container(o Options, args []string, mounts []corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:            ContainerName,
		Image:           o.Image,
		ImagePullPolicy: o.PullPolicy,
		Args:            args,
		RestartPolicy:   ptr(corev1.ContainerRestartPolicyAlways),
		VolumeMounts:    mounts,
		// A readiness probe, not a startup probe: the kubelet runs a
		// started container's first readiness probe at once, where a
		// startup probe waits for its next period (1 s at least) and holds
		// the agent container back until it passes; the agent container
		// now starts beside netd and the claim turns Ready when both are.
		// Later probes are rare: each is a process started in gVisor.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/lazaret-netd", "probe"}}},
			PeriodSeconds:    10,
			TimeoutSeconds:   6,
			FailureThreshold: 3,
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext:          SecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// SecurityContext is the sidecar's: pinned by a test.
func SecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Capabilities: &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
			Add:  []corev1.Capability{"NET_BIND_SERVICE"},
		},
		Privileged:               ptr(false),
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsUser:                ptr(int64(0)),
		RunAsGroup:               ptr(int64(0)),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// addSecrets puts the secrets into s: their hosts and placeholders, the
// CA certificate, the agent's bundle and netd's roots into the
// ConfigMap; values and the CA key into the Secret; placeholders and the
// bundle's variables into the agent's environment. It returns netd's
// extra arguments and mounts.
func (s *Spec) addSecrets(o Options) ([]string, []corev1.VolumeMount, error) {
	if len(o.CACert) == 0 || len(o.CAKey) == 0 || len(o.Roots) == 0 {
		return nil, nil, errors.New("netdpod: secrets need the CA certificate, its key and the roots")
	}
	s.SecretData = map[string][]byte{netdapi.PodCAKeyFile: slices.Clone(o.CAKey)}
	public := make([]secret.Secret, 0, len(o.Secrets))
	for _, sec := range o.Secrets {
		if err := sec.Validate(); err != nil {
			return nil, nil, fmt.Errorf("netdpod: %w", err)
		}
		key, err := netdapi.PodSecretValueFile(sec.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("netdpod: %w", err)
		}
		s.SecretData[key] = []byte(sec.Value)
		env, ok := o.SecretEnv[sec.Name]
		if !ok {
			return nil, nil, fmt.Errorf("netdpod: secret %s: no variable for its placeholder", sec.Name)
		}
		s.AgentEnv = append(s.AgentEnv, corev1.EnvVar{Name: env, Value: sec.Placeholder})
		sec.Value = ""
		public = append(public, sec)
	}
	pub, err := json.Marshal(public)
	if err != nil {
		return nil, nil, err
	}
	s.ConfigMapData[netdapi.PodSecretsFile] = string(pub)
	s.ConfigMapData[netdapi.PodCACertFile] = string(o.CACert)
	s.ConfigMapData[netdapi.PodRootsFile] = string(o.Roots)
	s.ConfigMapData[netdapi.PodCABundleFile] = string(o.Roots) + "\n" + string(o.CACert)
	for _, v := range caEnv {
		s.AgentEnv = append(s.AgentEnv, corev1.EnvVar{Name: v, Value: path.Join(AgentCADir, netdapi.PodCABundleFile)})
	}
	s.Volumes = append(s.Volumes,
		corev1.Volume{Name: SecretVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: SecretName(o.Name), DefaultMode: ptr(int32(0o400)),
		}}},
		corev1.Volume{Name: CAVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: o.Name}, DefaultMode: ptr(int32(0o444)),
			Items: []corev1.KeyToPath{{Key: netdapi.PodCABundleFile, Path: netdapi.PodCABundleFile}},
		}}})
	s.AgentVolumeMounts = append(s.AgentVolumeMounts, corev1.VolumeMount{Name: CAVolume, MountPath: AgentCADir, ReadOnly: true})
	args := []string{"--secrets-file", path.Join(netdapi.PodConfigDir, netdapi.PodSecretsFile), "--secret-dir", netdapi.PodSecretDir}
	mounts := []corev1.VolumeMount{{Name: SecretVolume, MountPath: netdapi.PodSecretDir, ReadOnly: true}}
	return args, mounts, nil
}

func ptr[T any](v T) *T { return &v }
