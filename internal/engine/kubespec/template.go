package kubespec

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// InitCommand keeps the agent container running, as locally
// (coordinator/sandbox.InitCommand): shells and commands are execs.
var InitCommand = []string{"/bin/sh", "-c", `trap 'exit 0' TERM INT HUP; while :; do sleep 2147483647 & wait $!; done`}

// Sidecar is the network sidecar of the pod (the DNS allowlist resolver,
// lazaret-netd in pod mode): a native sidecar (an init container with
// restartPolicy Always), its ConfigMap's data, its volumes and the pod's
// DNS settings that point the agent at it. Upstreams are the resolvers
// netd forwards to; the template's NetworkPolicy lets the pod reach them.
// With secrets, SecretData is the Secret beside the ConfigMap (the values
// and the CA key, mounted into netd only: never part of the template nor
// of its hash), AgentEnv and AgentVolumeMounts the agent container's
// placeholders and CA bundle, Labels extra labels of the ConfigMap and
// the Secret.
type Sidecar struct {
	Container         corev1.Container
	ConfigMapData     map[string]string
	Volumes           []corev1.Volume
	DNSPolicy         corev1.DNSPolicy
	DNSConfig         *corev1.PodDNSConfig
	Upstreams         []netip.AddrPort
	SecretName        string
	SecretData        map[string][]byte
	AgentEnv          []corev1.EnvVar
	AgentVolumeMounts []corev1.VolumeMount
	Labels            map[string]string
	// InitContainers run before the sidecar (the escalation client's
	// installer).
	InitContainers []corev1.Container
}

// SidecarFunc builds the sidecar for a policy; configMap is the name of
// the ConfigMap its volumes must refer to. Nil means no sidecar.
type SidecarFunc func(policy netpolicy.Policy, configMap string) (*Sidecar, error)

// Input is what a profile's template is made of.
type Input struct {
	Profile         string
	Image           string
	ImagePullPolicy string // Always, IfNotPresent, Never
	RuntimeClass    string
	// Env is the profile's non-secret environment (secrets never reach
	// the template: they would be readable by anyone who can read it).
	Env    map[string]string
	Policy netpolicy.Policy
	// Sidecar, when set, adds the network sidecar.
	Sidecar SidecarFunc
	// SidecarIdentity is hashed into the sidecar ConfigMap's name with
	// the policy: what the sidecar's configuration depends on besides the
	// policy (the secrets' configuration, placeholders and CA), so that a
	// changed one gets a new ConfigMap and Secret while sandboxes of the
	// old template keep theirs. Never a secret value.
	SidecarIdentity any
	// CPU and Memory, when set, are the agent container's limits
	// (Kubernetes quantities) and, unless CPURequest or MemoryRequest is
	// set, its requests too.
	CPU, Memory string
	// CPURequest and MemoryRequest, when set, are requests below the
	// limits (the built-in cluster default's request: kubecli's
	// podResources).
	CPURequest, MemoryRequest string
	// EphemeralStorage, when set, is the agent container's
	// ephemeral-storage limit, with a request of 0: the kubelet evicts
	// the pod once its writable layer, logs and emptyDir volumes (the
	// workspace) exceed it, and the scheduler reserves nothing.
	EphemeralStorage string
	// State, when set, puts the persistent dirs on their PVC (state.go).
	State *State
}

// Objects are the shared objects of a profile's template.
type Objects struct {
	Template *SandboxTemplate
	// ConfigMap is the sidecar's configuration, nil without a sidecar.
	ConfigMap *corev1.ConfigMap
	// Secret holds the sidecar's secret values, nil without secrets.
	Secret *corev1.Secret
}

// Template builds the SandboxTemplate of in, named after its profile and
// the hash of its content: a changed profile makes a new template, and
// sandboxes of the old one keep theirs.
func Template(in Input) (*Objects, error) {
	if in.Profile == "" || in.Image == "" || in.RuntimeClass == "" {
		return nil, fmt.Errorf("kubespec: profile, image and runtime class are required")
	}
	res, err := resources(in)
	if err != nil {
		return nil, err
	}
	pod := agentPod(in)
	pod.Containers[0].Resources = res
	if in.State != nil {
		if err := addState(&pod, in); err != nil {
			return nil, err
		}
	}
	np := egressPolicy(in.Policy.AllowEgress)
	// The name is not known before the content hash; the sidecar's
	// ConfigMap is named after the same hash of everything but itself.
	base, err := contentHash(struct {
		P  corev1.PodSpec
		N  *NetworkPolicySpec
		Po netpolicy.Policy
		I  any `json:",omitempty"`
	}{pod, np, in.Policy, in.SidecarIdentity})
	if err != nil {
		return nil, err
	}
	prefix := "lazaret-" + objectProfile(in.Profile) + "-"
	name := prefix + base
	out := &Objects{}
	if in.Sidecar != nil {
		cm, sec, err := addSidecar(&pod, np, in, prefix+base+"-netd")
		if err != nil {
			return nil, err
		}
		out.ConfigMap, out.Secret = cm, sec
		// The sidecar (its image, its configuration) is part of the
		// content too.
		full, err := contentHash(struct {
			P  corev1.PodSpec
			N  *NetworkPolicySpec
			CM map[string]string
		}{pod, np, cm.Data})
		if err != nil {
			return nil, err
		}
		name = prefix + full
	}
	out.Template = &SandboxTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: ExtensionsGroup + "/" + Version, Kind: KindSandboxTemplate},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: managedLabels(in.Profile)},
		Spec: SandboxTemplateSpec{
			PodTemplate:             PodTemplate{Spec: pod, ObjectMeta: PodMetadata{Labels: managedLabels(in.Profile)}},
			Service:                 new(bool),
			NetworkPolicy:           np,
			NetworkPolicyManagement: "Managed",
			EnvVarsInjectionPolicy:  "Disallowed",
		},
	}
	return out, nil
}

// agentPod is the hardened pod of the agent container.
func agentPod(in Input) corev1.PodSpec {
	f := false
	runtimeClass := in.RuntimeClass
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	return corev1.PodSpec{
		RuntimeClassName:             &runtimeClass,
		AutomountServiceAccountToken: &f,
		EnableServiceLinks:           &f,
		HostNetwork:                  false,
		HostPID:                      false,
		HostIPC:                      false,
		ShareProcessNamespace:        &f,
		SecurityContext:              &corev1.PodSecurityContext{SeccompProfile: seccomp},
		Containers: []corev1.Container{{
			Name:            ContainerName,
			Image:           in.Image,
			ImagePullPolicy: corev1.PullPolicy(in.ImagePullPolicy),
			Command:         InitCommand,
			WorkingDir:      WorkspaceDir,
			Env:             envVars(in.Env),
			SecurityContext: agentSecurityContext(seccomp),
			VolumeMounts:    []corev1.VolumeMount{{Name: "workspace", MountPath: WorkspaceDir}},
		}},
		Volumes: []corev1.Volume{{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		// Shells are execs: the pod itself never restarts the agent's
		// work, but a crashed init loop comes back.
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr64(5),
	}
}

// agentSecurityContext is the agent container's: no capability, no
// privilege escalation, not privileged, seccomp.
func agentSecurityContext(seccomp *corev1.SeccompProfile) *corev1.SecurityContext {
	f := false
	return &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		AllowPrivilegeEscalation: &f,
		Privileged:               &f,
		SeccompProfile:           seccomp,
	}
}

func ptr64(n int64) *int64 { return &n }

// resources are the agent container's requests and limits: each limit
// given, with its request (the limit's own value unless one is given;
// ephemeral storage requests 0, or the API server would default the
// request to the limit and the scheduler reserve it).
func resources(in Input) (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	for _, e := range []struct {
		name           corev1.ResourceName
		limit, request string
	}{
		{corev1.ResourceCPU, in.CPU, in.CPURequest},
		{corev1.ResourceMemory, in.Memory, in.MemoryRequest},
		{corev1.ResourceEphemeralStorage, in.EphemeralStorage, "0"},
	} {
		if e.limit == "" {
			if e.request != "" && e.request != "0" {
				return r, fmt.Errorf("kubespec: a %s request without a limit", e.name)
			}
			continue
		}
		lim, err := resource.ParseQuantity(e.limit)
		if err != nil {
			return r, fmt.Errorf("kubespec: %s %q: %w", e.name, e.limit, err)
		}
		req := lim
		if e.request != "" {
			if req, err = resource.ParseQuantity(e.request); err != nil {
				return r, fmt.Errorf("kubespec: %s request %q: %w", e.name, e.request, err)
			}
			if req.Cmp(lim) > 0 {
				return r, fmt.Errorf("kubespec: %s request %s above its limit %s", e.name, e.request, e.limit)
			}
		}
		if r.Limits == nil {
			r.Limits, r.Requests = corev1.ResourceList{}, corev1.ResourceList{}
		}
		r.Limits[e.name], r.Requests[e.name] = lim, req
	}
	return r, nil
}

// envVars is env in name order (a stable template hash).
func envVars(env map[string]string) []corev1.EnvVar {
	names := make([]string, 0, len(env))
	for n := range env {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]corev1.EnvVar, 0, len(names))
	for _, n := range names {
		out = append(out, corev1.EnvVar{Name: n, Value: env[n]})
	}
	return out
}

// egressPolicy is the template's NetworkPolicy: no ingress, egress only
// to the profile's CIDRs. Domains are the sidecar's job: a NetworkPolicy
// cannot name them.
func egressPolicy(cidrs []netpolicy.CIDR) *NetworkPolicySpec {
	np := &NetworkPolicySpec{}
	var peers []networkingv1.NetworkPolicyPeer
	for _, c := range cidrs {
		if !c.Prefix.IsValid() || !c.Expires.IsZero() {
			continue
		}
		if peer, ok := blockPeer(c.Prefix, netpolicy.AlwaysDeny); ok {
			peers = append(peers, peer)
		}
	}
	if len(peers) > 0 {
		np.Egress = []networkingv1.NetworkPolicyEgressRule{{To: peers}}
	}
	return np
}

// blockPeer is an ipBlock for c without the prefixes of deny inside it;
// ok is false when c lies wholly inside one of them. Locally the deny
// set wins over any allow_egress CIDR (nftables); a NetworkPolicy has no
// deny rule, so the same ranges are its CIDRs' except blocks.
func blockPeer(c netip.Prefix, deny []netip.Prefix) (networkingv1.NetworkPolicyPeer, bool) {
	c = c.Masked()
	var except []string
	for _, d := range netpolicy.MergePrefixes(deny) {
		if d.Addr().Is4() != c.Addr().Is4() {
			continue
		}
		switch {
		case d.Bits() <= c.Bits() && d.Contains(c.Addr()):
			return networkingv1.NetworkPolicyPeer{}, false
		case d.Bits() > c.Bits() && c.Contains(d.Addr()):
			except = append(except, d.String())
		}
	}
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c.String(), Except: except}}, true
}

// addSidecar puts the network sidecar into pod and opens its upstream
// resolvers (port 53, UDP and TCP) in np.
func addSidecar(pod *corev1.PodSpec, np *NetworkPolicySpec, in Input, configMap string) (*corev1.ConfigMap, *corev1.Secret, error) {
	sc, err := in.Sidecar(in.Policy, configMap)
	if err != nil {
		return nil, nil, fmt.Errorf("network sidecar: %w", err)
	}
	pod.InitContainers = append(append(pod.InitContainers, sc.InitContainers...), sc.Container)
	agent := &pod.Containers[0]
	// A variable the profile sets itself (a CA variable pointing at its
	// own bundle) keeps the profile's value, as locally; the
	// configuration refuses a secret's variable that env also sets.
	for _, v := range sc.AgentEnv {
		if !slices.ContainsFunc(agent.Env, func(e corev1.EnvVar) bool { return e.Name == v.Name }) {
			agent.Env = append(agent.Env, v)
		}
	}
	agent.VolumeMounts = append(agent.VolumeMounts, sc.AgentVolumeMounts...)
	pod.Volumes = append(pod.Volumes, sc.Volumes...)
	pod.DNSPolicy = sc.DNSPolicy
	pod.DNSConfig = sc.DNSConfig
	if len(sc.Upstreams) > 0 {
		udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
		rule := networkingv1.NetworkPolicyEgressRule{}
		seen := map[uint16]bool{}
		for _, u := range sc.Upstreams {
			a := u.Addr().Unmap()
			rule.To = append(rule.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(a, a.BitLen()).String()}})
			if !seen[u.Port()] {
				seen[u.Port()] = true
				port := intstr.FromInt32(int32(u.Port()))
				rule.Ports = append(rule.Ports, networkingv1.NetworkPolicyPort{Protocol: &udp, Port: &port}, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &port})
			}
		}
		np.Egress = append(np.Egress, rule)
	}
	labels := managedLabels(in.Profile)
	for k, v := range sc.Labels {
		labels[k] = v
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: configMap, Labels: labels},
		Data:       sc.ConfigMapData,
	}
	var sec *corev1.Secret
	if sc.SecretData != nil {
		sec = &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: sc.SecretName, Labels: maps.Clone(labels)},
			Type:       corev1.SecretTypeOpaque,
			Data:       sc.SecretData,
		}
	}
	return cm, sec, nil
}
