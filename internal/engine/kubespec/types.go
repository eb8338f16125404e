// Package kubespec turns a profile into the objects of the Kubernetes
// backend: agent-sandbox's SandboxTemplate, SandboxWarmPool and
// SandboxClaim (its v1beta1 API, mirrored here by small structs with the
// same JSON names, so that neither the controller-runtime module of
// sigs.k8s.io/agent-sandbox nor client-go links in), with the names and
// labels that tie them to a Domain Anchor. Pure: no I/O.
package kubespec

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API groups and versions of agent-sandbox v1.0.1.
const (
	SandboxGroup    = "agents.x-k8s.io"
	ExtensionsGroup = "extensions.agents.x-k8s.io"
	Version         = "v1beta1"
)

// Kinds and their resources (plural names).
const (
	KindSandbox         = "Sandbox"
	KindSandboxTemplate = "SandboxTemplate"
	KindSandboxWarmPool = "SandboxWarmPool"
	KindSandboxClaim    = "SandboxClaim"

	ResourceSandboxes        = "sandboxes"
	ResourceSandboxTemplates = "sandboxtemplates"
	ResourceSandboxWarmPools = "sandboxwarmpools"
	ResourceSandboxClaims    = "sandboxclaims"
)

// Condition types and the annotations agent-sandbox sets.
const (
	ConditionReady = "Ready"
	// PodNameAnnotation, on a Sandbox, names its pod (when it differs
	// from the Sandbox's name, as for an adopted warm one).
	PodNameAnnotation = "agents.x-k8s.io/pod-name"
	// SandboxNameAnnotation, on a claim, names its Sandbox.
	SandboxNameAnnotation = "agents.x-k8s.io/sandbox-name"
)

// PodMetadata is agent-sandbox's PodMetadata.
type PodMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate is agent-sandbox's PodTemplate.
type PodTemplate struct {
	Spec       corev1.PodSpec `json:"spec"`
	ObjectMeta PodMetadata    `json:"metadata"`
}

// NetworkPolicySpec is the template's networkPolicy: agent-sandbox makes
// it one NetworkPolicy selecting the template's pods, for ingress and
// egress (an empty list denies everything of that direction).
type NetworkPolicySpec struct {
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`
	Egress  []networkingv1.NetworkPolicyEgressRule  `json:"egress,omitempty"`
}

// SandboxTemplateSpec is agent-sandbox's SandboxTemplateSpec (the
// blueprint inlined), without the volume claim templates lazaret does not
// use yet.
type SandboxTemplateSpec struct {
	PodTemplate PodTemplate `json:"podTemplate"`
	// Service false: no Service in front of the agent's pod.
	Service                 *bool              `json:"service,omitempty"`
	NetworkPolicy           *NetworkPolicySpec `json:"networkPolicy,omitempty"`
	NetworkPolicyManagement string             `json:"networkPolicyManagement,omitempty"`
	EnvVarsInjectionPolicy  string             `json:"envVarsInjectionPolicy,omitempty"`
}

// SandboxTemplate is extensions.agents.x-k8s.io/v1beta1 SandboxTemplate.
type SandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SandboxTemplateSpec `json:"spec"`
}

// SandboxWarmPoolSpec is agent-sandbox's SandboxWarmPoolSpec.
type SandboxWarmPoolSpec struct {
	Replicas    *int32 `json:"replicas,omitempty"`
	TemplateRef Ref    `json:"sandboxTemplateRef"`
}

// SandboxWarmPoolStatus is what lazaret reads of a warm pool's status.
type SandboxWarmPoolStatus struct {
	Replicas      int32 `json:"replicas,omitempty"`
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// SandboxWarmPool is extensions.agents.x-k8s.io/v1beta1 SandboxWarmPool.
type SandboxWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SandboxWarmPoolSpec   `json:"spec"`
	Status            SandboxWarmPoolStatus `json:"status,omitempty"`
}

// Ref names an object of the same namespace.
type Ref struct {
	Name string `json:"name"`
}

// SandboxClaimSpec is agent-sandbox's SandboxClaimSpec: in v1beta1 a
// claim always names a warm pool (one of zero replicas is a cold start).
type SandboxClaimSpec struct {
	WarmPoolRef           Ref         `json:"warmPoolRef"`
	AdditionalPodMetadata PodMetadata `json:"additionalPodMetadata,omitempty"`
}

// SandboxClaimStatus is agent-sandbox's SandboxClaimStatus.
type SandboxClaimStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Sandbox    ClaimSandbox       `json:"sandbox,omitempty"`
}

// ClaimSandbox is the claim's view of its Sandbox.
type ClaimSandbox struct {
	Name   string   `json:"name,omitempty"`
	PodIPs []string `json:"podIPs,omitempty"`
}

// SandboxClaim is extensions.agents.x-k8s.io/v1beta1 SandboxClaim.
type SandboxClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SandboxClaimSpec   `json:"spec"`
	Status            SandboxClaimStatus `json:"status,omitempty"`
}

// SandboxStatus is what lazaret reads of a Sandbox's status.
type SandboxStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	NodeName   string             `json:"nodeName,omitempty"`
	PodIPs     []string           `json:"podIPs,omitempty"`
}

// Sandbox is agents.x-k8s.io/v1beta1 Sandbox, as far as lazaret reads it
// (it never writes one: the claim controller does).
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            SandboxStatus `json:"status,omitempty"`
}

// ReadyCondition returns the Ready condition of conds, nil if none.
func ReadyCondition(conds []metav1.Condition) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == ConditionReady {
			return &conds[i]
		}
	}
	return nil
}
