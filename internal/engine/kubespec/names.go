package kubespec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Labels and annotations lazaret puts on its objects. The claim's objects
// carry them in lazaret's own domain; labels lazaret asks agent-sandbox to
// put on the pod (a claim's additionalPodMetadata) must be under a domain
// of the controller's allowlist, whose default is sandbox.users.io and its
// subdomains (agent-sandbox v1.0.1, validateAdditionalPodMetadata).
const (
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	ManagedByValue      = "lazaret"
	LabelProfile        = "lazaret.dev/profile"
	LabelDomain         = "lazaret.dev/domain"
	AnnotationWorkspace = "lazaret.dev/workspace"
	// LabelAttempt names the attempt (`lazaret fork`) a claim, PVC or
	// copy pod belongs to; absent on the workspace's own.
	LabelAttempt = "lazaret.dev/attempt"
	// PodLabelDomain is the Domain Anchor on the sandbox's pod.
	PodLabelDomain = "lazaret.sandbox.users.io/domain"
	// ContainerName is the agent's container in the pod.
	ContainerName = "agent"
	// WorkspaceDir is the agent's working directory in the pod.
	WorkspaceDir = "/workspace"
)

// ManagedSelector selects every object lazaret made.
const ManagedSelector = LabelManagedBy + "=" + ManagedByValue

// ClaimName is the SandboxClaim of a Domain Anchor: one per (profile,
// workspace), so that every shell and exec of a workspace meets the same
// sandbox. The hash is 12 lower-case hex digits (domain.Hash).
func ClaimName(domainHash string) string { return "lazaret-" + domainHash }

// objectProfile is a profile name as a Kubernetes name part: profile
// names allow '_', object names do not.
func objectProfile(profile string) string { return strings.ReplaceAll(profile, "_", "-") }

// contentHash is the first 10 hex digits of the SHA-256 of v's JSON
// (map keys sorted by encoding/json, so the same content gives the same
// hash).
func contentHash(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10], nil
}

// managedLabels are the labels of every object of profile.
func managedLabels(profile string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelProfile: profile}
}

// CheckName checks that s, read from the cluster, is an object name
// (an RFC 1123 subdomain of at most 253 characters) before lazaret puts
// it into a request path.
func CheckName(s string) error {
	if s == "" || len(s) > 253 {
		return fmt.Errorf("invalid object name (%d bytes)", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if alnum {
			continue
		}
		if (c == '-' || c == '.') && i > 0 && i < len(s)-1 {
			continue
		}
		return fmt.Errorf("invalid object name: byte %d", i)
	}
	return nil
}
