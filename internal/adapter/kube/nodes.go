package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeStorage is a node's ephemeral storage as the kubelet reports it:
// the size of its filesystem (Capacity) and what pods may use of it
// (Allocatable: the capacity less the kubelet's reservations and its
// eviction threshold), in bytes.
type NodeStorage struct {
	Name                  string
	Capacity, Allocatable int64
}

// NodesStorage is the ephemeral storage of the nodes a sandbox pod can be
// scheduled on: nodes that are not cordoned and carry no NoSchedule or
// NoExecute taint (lazaret's pods tolerate none), or every node when
// none is left (a cluster whose only node is tainted). A node that
// reports no ephemeral storage is left out. Listing nodes is
// cluster-scoped: a user without that permission gets ErrForbidden.
func (c *Client) NodesStorage(ctx context.Context) ([]NodeStorage, error) {
	l, err := c.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, wrap("listing nodes", err, false)
	}
	var open, all []NodeStorage
	for _, n := range l.Items {
		capQ, ok := n.Status.Capacity[corev1.ResourceEphemeralStorage]
		if !ok || capQ.IsZero() {
			continue
		}
		s := NodeStorage{Name: n.Name, Capacity: capQ.Value(), Allocatable: capQ.Value()}
		if a, ok := n.Status.Allocatable[corev1.ResourceEphemeralStorage]; ok {
			s.Allocatable = a.Value()
		}
		all = append(all, s)
		if schedulable(&n) {
			open = append(open, s)
		}
	}
	if len(open) > 0 {
		return open, nil
	}
	return all, nil
}

func schedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	return true
}
