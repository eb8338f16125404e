package kube

import (
	"context"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServerVersion is the API server's version ("v1.37.2").
func (c *Client) ServerVersion() (string, error) {
	v, err := c.Core.Discovery().ServerVersion()
	if err != nil {
		return "", wrap("reaching the API server", err, false)
	}
	return v.GitVersion, nil
}

// Namespace checks that the client's namespace exists.
func (c *Client) NamespaceExists(ctx context.Context) error {
	_, err := c.Core.CoreV1().Namespaces().Get(ctx, c.Namespace, metav1.GetOptions{})
	return wrap("reading namespace "+c.Namespace, err, false)
}

// Resources lists the resources the server serves for groupVersion
// ("extensions.agents.x-k8s.io/v1beta1"); ErrCRDMissing when it serves
// none.
func (c *Client) Resources(groupVersion string) ([]string, error) {
	l, err := c.Core.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		k := kindOf(err, false)
		if k == ErrNotFound {
			k = ErrCRDMissing
		}
		return nil, &Error{Op: "discovering " + groupVersion, Kind: k, Err: err}
	}
	var out []string
	for _, r := range l.APIResources {
		out = append(out, r.Name)
	}
	return out, nil
}

// RuntimeClassHandler is the handler of a RuntimeClass ("runsc").
func (c *Client) RuntimeClassHandler(ctx context.Context, name string) (string, error) {
	rc, err := c.Core.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", wrap("reading runtimeclass "+name, err, false)
	}
	return rc.Handler, nil
}

// LeaseRenewed is when the holder of Lease name in namespace ns last
// renewed it, and who holds it.
func (c *Client) LeaseRenewed(ctx context.Context, ns, name string) (time.Time, string, error) {
	l, err := c.Core.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, "", wrap("reading lease "+ns+"/"+name, err, false)
	}
	var holder string
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, holder, nil
	}
	return l.Spec.RenewTime.Time, holder, nil
}

// Pod reads one pod of the namespace.
func (c *Client) Pod(ctx context.Context, name string) (*corev1.Pod, error) {
	p, err := c.Core.CoreV1().Pods(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap("reading pod "+name, err, false)
	}
	return p, nil
}

// CreatePod creates a pod in the namespace.
func (c *Client) CreatePod(ctx context.Context, p *corev1.Pod) error {
	_, err := c.Core.CoreV1().Pods(c.Namespace).Create(ctx, p, metav1.CreateOptions{})
	return wrap("creating pod "+p.Name, err, false)
}

// DeletePod deletes a pod at once; a missing one is not an error.
func (c *Client) DeletePod(ctx context.Context, name string) error {
	var zero int64
	err := c.Core.CoreV1().Pods(c.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if kindOf(err, false) == ErrNotFound {
		return nil
	}
	return wrap("deleting pod "+name, err, false)
}

// CreateNetworkPolicy creates a NetworkPolicy in the namespace.
func (c *Client) CreateNetworkPolicy(ctx context.Context, np *networkingv1.NetworkPolicy) error {
	_, err := c.Core.NetworkingV1().NetworkPolicies(c.Namespace).Create(ctx, np, metav1.CreateOptions{})
	return wrap("creating networkpolicy "+np.Name, err, false)
}

// DeleteNetworkPolicy deletes a NetworkPolicy; a missing one is not an
// error.
func (c *Client) DeleteNetworkPolicy(ctx context.Context, name string) error {
	err := c.Core.NetworkingV1().NetworkPolicies(c.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if kindOf(err, false) == ErrNotFound {
		return nil
	}
	return wrap("deleting networkpolicy "+name, err, false)
}

// ConfigMap reads a ConfigMap's data.
func (c *Client) ConfigMap(ctx context.Context, name string) (map[string]string, error) {
	cm, err := c.Core.CoreV1().ConfigMaps(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap("reading configmap "+name, err, false)
	}
	return cm.Data, nil
}

// ApplyConfigMap creates cm or replaces its data and labels.
func (c *Client) ApplyConfigMap(ctx context.Context, cm *corev1.ConfigMap) error {
	api := c.Core.CoreV1().ConfigMaps(c.Namespace)
	cur, err := api.Get(ctx, cm.Name, metav1.GetOptions{})
	if kindOf(err, false) == ErrNotFound {
		_, err = api.Create(ctx, cm, metav1.CreateOptions{})
		return wrap("creating configmap "+cm.Name, err, false)
	}
	if err != nil {
		return wrap("reading configmap "+cm.Name, err, false)
	}
	cur.Data, cur.Labels = cm.Data, cm.Labels
	_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
	return wrap("updating configmap "+cm.Name, err, false)
}

// DeleteConfigMaps deletes the ConfigMaps matching selector.
func (c *Client) DeleteConfigMaps(ctx context.Context, selector string) error {
	err := c.Core.CoreV1().ConfigMaps(c.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector})
	return wrap("deleting configmaps "+selector, err, false)
}

// ServiceAddrs are the cluster IPs of Service ns/name with each of its
// ports, for a protocol ("UDP", "TCP"); none for a headless Service.
func (c *Client) ServiceAddrs(ctx context.Context, ns, name string, protocol corev1.Protocol) ([]netip.AddrPort, error) {
	svc, err := c.Core.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap("reading service "+ns+"/"+name, err, false)
	}
	var out []netip.AddrPort
	for _, ip := range svc.Spec.ClusterIPs {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			continue // "None", or junk
		}
		for _, p := range svc.Spec.Ports {
			if p.Protocol == protocol && p.Port > 0 && p.Port < 1<<16 {
				out = append(out, netip.AddrPortFrom(a, uint16(p.Port)))
			}
		}
	}
	return out, nil
}

// ConfigMaps lists the ConfigMaps matching selector.
func (c *Client) ConfigMaps(ctx context.Context, selector string) ([]corev1.ConfigMap, error) {
	l, err := c.Core.CoreV1().ConfigMaps(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, wrap("listing configmaps "+selector, err, false)
	}
	return l.Items, nil
}

// DeleteConfigMap deletes a ConfigMap; a missing one is not an error.
func (c *Client) DeleteConfigMap(ctx context.Context, name string) error {
	err := c.Core.CoreV1().ConfigMaps(c.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if kindOf(err, false) == ErrNotFound {
		return nil
	}
	return wrap("deleting configmap "+name, err, false)
}

// SecretData reads a Secret's data. Errors name the Secret, never its
// content.
func (c *Client) SecretData(ctx context.Context, name string) (map[string][]byte, error) {
	s, err := c.Core.CoreV1().Secrets(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap("reading secret "+name, err, false)
	}
	return s.Data, nil
}

// ApplySecret creates s or replaces its data and labels (an Opaque,
// immutable-false Secret: a refreshed value updates it in place).
func (c *Client) ApplySecret(ctx context.Context, s *corev1.Secret) error {
	api := c.Core.CoreV1().Secrets(c.Namespace)
	cur, err := api.Get(ctx, s.Name, metav1.GetOptions{})
	if kindOf(err, false) == ErrNotFound {
		_, err = api.Create(ctx, s, metav1.CreateOptions{})
		return wrap("creating secret "+s.Name, err, false)
	}
	if err != nil {
		return wrap("reading secret "+s.Name, err, false)
	}
	cur.Data, cur.StringData, cur.Labels = s.Data, nil, s.Labels
	_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
	return wrap("updating secret "+s.Name, err, false)
}

// DeleteSecret deletes a Secret; a missing one is not an error.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	err := c.Core.CoreV1().Secrets(c.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if kindOf(err, false) == ErrNotFound {
		return nil
	}
	return wrap("deleting secret "+name, err, false)
}
