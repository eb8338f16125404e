package kubespec

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WarmPool is the SandboxWarmPool of a template: in agent-sandbox v1beta1
// a claim always names a warm pool, so every template has one, of zero
// replicas (each claim cold-starts from the template) unless the profile
// asks for warm sandboxes. It has the template's name.
func WarmPool(t *SandboxTemplate, replicas int) *SandboxWarmPool {
	n := int32(replicas)
	return &SandboxWarmPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: ExtensionsGroup + "/" + Version, Kind: KindSandboxWarmPool},
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Labels: copyLabels(t.Labels)},
		Spec:       SandboxWarmPoolSpec{Replicas: &n, TemplateRef: Ref{Name: t.Name}},
	}
}

// ClaimInput is one Domain Anchor's claim.
type ClaimInput struct {
	Profile    string
	DomainHash string
	Workspace  string // the host workspace, shown by status
	WarmPool   string
	// Attempt names the attempt whose claim this is ("" for the
	// workspace's own sandbox); DomainHash is then the attempt's.
	Attempt string
}

// Claim is the SandboxClaim of a Domain Anchor on warm pool in.WarmPool.
func Claim(in ClaimInput) *SandboxClaim {
	labels := managedLabels(in.Profile)
	labels[LabelDomain] = in.DomainHash
	if in.Attempt != "" {
		labels[LabelAttempt] = in.Attempt
	}
	return &SandboxClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: ExtensionsGroup + "/" + Version, Kind: KindSandboxClaim},
		ObjectMeta: metav1.ObjectMeta{
			Name:        ClaimName(in.DomainHash),
			Labels:      labels,
			Annotations: map[string]string{AnnotationWorkspace: in.Workspace},
		},
		Spec: SandboxClaimSpec{
			WarmPoolRef:           Ref{Name: in.WarmPool},
			AdditionalPodMetadata: PodMetadata{Labels: map[string]string{PodLabelDomain: in.DomainHash}},
		},
	}
}

func copyLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
