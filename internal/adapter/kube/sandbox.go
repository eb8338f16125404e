package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
)

// The agent-sandbox resources.
var (
	SandboxesGVR = schema.GroupVersionResource{Group: kubespec.SandboxGroup, Version: kubespec.Version, Resource: kubespec.ResourceSandboxes}
	TemplatesGVR = schema.GroupVersionResource{Group: kubespec.ExtensionsGroup, Version: kubespec.Version, Resource: kubespec.ResourceSandboxTemplates}
	WarmPoolsGVR = schema.GroupVersionResource{Group: kubespec.ExtensionsGroup, Version: kubespec.Version, Resource: kubespec.ResourceSandboxWarmPools}
	ClaimsGVR    = schema.GroupVersionResource{Group: kubespec.ExtensionsGroup, Version: kubespec.Version, Resource: kubespec.ResourceSandboxClaims}
)

func (c *Client) res(gvr schema.GroupVersionResource) dynamic.ResourceInterface {
	return c.Dynamic.Resource(gvr).Namespace(c.Namespace)
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func fromUnstructured[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("decoding %s %q: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// SpecHashAnnotation records the hash of the spec lazaret last wrote: the
// API server adds defaults to a stored spec, so comparing specs would see
// a change on every start.
const SpecHashAnnotation = "lazaret.dev/spec-hash"

// apply creates obj (named name) or, when it exists with a spec lazaret
// did not write, replaces its spec; it reports what it did: "created",
// "updated" or "".
func (c *Client) apply(ctx context.Context, gvr schema.GroupVersionResource, name string, obj any) (string, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return "", err
	}
	spec, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return "", fmt.Errorf("encoding the spec of %s: %w", name, err)
	}
	sum := sha256.Sum256(spec)
	hash := hex.EncodeToString(sum[:16])
	setAnnotation(u, SpecHashAnnotation, hash)
	r := c.res(gvr)
	cur, err := r.Get(ctx, name, metav1.GetOptions{})
	if kindOf(err, true) == ErrNotFound {
		if _, err := r.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return "", wrap("creating "+gvr.Resource+" "+name, err, true)
		}
		return "created", nil
	}
	if err != nil {
		return "", wrap("reading "+gvr.Resource+" "+name, err, true)
	}
	if cur.GetAnnotations()[SpecHashAnnotation] == hash {
		return "", nil
	}
	cur.Object["spec"] = u.Object["spec"]
	setAnnotation(cur, SpecHashAnnotation, hash)
	if _, err := r.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return "", wrap("updating "+gvr.Resource+" "+name, err, true)
	}
	return "updated", nil
}

func setAnnotation(u *unstructured.Unstructured, k, v string) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	u.SetAnnotations(a)
}

// ApplyTemplate creates or updates a SandboxTemplate.
func (c *Client) ApplyTemplate(ctx context.Context, t *kubespec.SandboxTemplate) (string, error) {
	return c.apply(ctx, TemplatesGVR, t.Name, t)
}

// ApplyWarmPool creates or updates a SandboxWarmPool.
func (c *Client) ApplyWarmPool(ctx context.Context, w *kubespec.SandboxWarmPool) (string, error) {
	return c.apply(ctx, WarmPoolsGVR, w.Name, w)
}

// CreateClaim creates claim; when one of that name exists it returns the
// existing one and created false (another shell of the same workspace).
func (c *Client) CreateClaim(ctx context.Context, claim *kubespec.SandboxClaim) (*kubespec.SandboxClaim, bool, error) {
	u, err := toUnstructured(claim)
	if err != nil {
		return nil, false, err
	}
	out, err := c.res(ClaimsGVR).Create(ctx, u, metav1.CreateOptions{})
	if kindOf(err, true) == ErrAlreadyExists {
		cur, err := c.Claim(ctx, claim.Name)
		return cur, false, err
	}
	if err != nil {
		return nil, false, wrap("creating sandboxclaim "+claim.Name, err, true)
	}
	cur, err := fromUnstructured[kubespec.SandboxClaim](out)
	return cur, true, err
}

// Claim reads one claim.
func (c *Client) Claim(ctx context.Context, name string) (*kubespec.SandboxClaim, error) {
	u, err := c.res(ClaimsGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap("reading sandboxclaim "+name, err, true)
	}
	return fromUnstructured[kubespec.SandboxClaim](u)
}

// Claims lists the claims matching a label selector.
func (c *Client) Claims(ctx context.Context, selector string) ([]kubespec.SandboxClaim, error) {
	return list[kubespec.SandboxClaim](ctx, c, ClaimsGVR, selector)
}

// Templates lists the templates matching a label selector.
func (c *Client) Templates(ctx context.Context, selector string) ([]kubespec.SandboxTemplate, error) {
	return list[kubespec.SandboxTemplate](ctx, c, TemplatesGVR, selector)
}

// WarmPools lists the warm pools matching a label selector.
func (c *Client) WarmPools(ctx context.Context, selector string) ([]kubespec.SandboxWarmPool, error) {
	return list[kubespec.SandboxWarmPool](ctx, c, WarmPoolsGVR, selector)
}

func list[T any](ctx context.Context, c *Client, gvr schema.GroupVersionResource, selector string) ([]T, error) {
	ul, err := c.res(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, wrap("listing "+gvr.Resource, err, true)
	}
	out := make([]T, 0, len(ul.Items))
	for i := range ul.Items {
		v, err := fromUnstructured[T](&ul.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

// Sandbox reads one Sandbox.
func (c *Client) Sandbox(ctx context.Context, name string) (*kubespec.Sandbox, error) {
	u, err := c.res(SandboxesGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap("reading sandbox "+name, err, true)
	}
	return fromUnstructured[kubespec.Sandbox](u)
}

// Delete deletes one object of an agent-sandbox resource; a missing one
// is not an error. Dependents go in the background (the claim's Sandbox
// and pod are the controller's to remove).
func (c *Client) Delete(ctx context.Context, gvr schema.GroupVersionResource, name string) error {
	policy := metav1.DeletePropagationBackground
	err := c.res(gvr).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if kindOf(err, true) == ErrNotFound {
		return nil
	}
	return wrap("deleting "+gvr.Resource+" "+name, err, true)
}
