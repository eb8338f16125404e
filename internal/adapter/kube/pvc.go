package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnsurePVC creates pvc unless one of its name exists, and returns the
// one in the cluster and whether this call created it. An existing PVC is
// never changed: it holds the user's data, and most of its spec is
// immutable anyway.
func (c *Client) EnsurePVC(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, bool, error) {
	api := c.Core.CoreV1().PersistentVolumeClaims(c.Namespace)
	out, err := api.Create(ctx, pvc, metav1.CreateOptions{})
	if kindOf(err, false) == ErrAlreadyExists {
		cur, err := c.PVC(ctx, pvc.Name)
		return cur, false, err
	}
	if err != nil {
		return nil, false, wrap("creating persistentvolumeclaim "+pvc.Name, err, false)
	}
	return out, true, nil
}

// PVC reads one PersistentVolumeClaim.
func (c *Client) PVC(ctx context.Context, name string) (*corev1.PersistentVolumeClaim, error) {
	p, err := c.Core.CoreV1().PersistentVolumeClaims(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, wrap("reading persistentvolumeclaim "+name, err, false)
	}
	return p, nil
}

// PVCs lists the PersistentVolumeClaims matching selector.
func (c *Client) PVCs(ctx context.Context, selector string) ([]corev1.PersistentVolumeClaim, error) {
	l, err := c.Core.CoreV1().PersistentVolumeClaims(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, wrap("listing persistentvolumeclaims "+selector, err, false)
	}
	return l.Items, nil
}

// DeletePVC deletes a PersistentVolumeClaim; a missing one is not an
// error. A PVC a pod still mounts goes when the pod has (the API server's
// pvc-protection finalizer).
func (c *Client) DeletePVC(ctx context.Context, name string) error {
	err := c.Core.CoreV1().PersistentVolumeClaims(c.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if kindOf(err, false) == ErrNotFound {
		return nil
	}
	return wrap("deleting persistentvolumeclaim "+name, err, false)
}

// isDefaultClass is the annotation that makes a StorageClass the
// cluster's default.
const isDefaultClass = "storageclass.kubernetes.io/is-default-class"

// StorageClass is the provisioner of StorageClass name.
func (c *Client) StorageClass(ctx context.Context, name string) (string, error) {
	sc, err := c.Core.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", wrap("reading storageclass "+name, err, false)
	}
	return sc.Provisioner, nil
}

// DefaultStorageClass is the cluster's default StorageClass and its
// provisioner; "" when it has none.
func (c *Client) DefaultStorageClass(ctx context.Context) (string, string, error) {
	l, err := c.Core.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", wrap("listing storageclasses", err, false)
	}
	for _, sc := range l.Items {
		if sc.Annotations[isDefaultClass] == "true" {
			return sc.Name, sc.Provisioner, nil
		}
	}
	return "", "", nil
}

// CSIDriverExists reports whether a CSIDriver of name is registered: a
// StorageClass whose provisioner is one provisions through CSI, the only
// way a PVC's dataSource (a clone of another PVC) is honoured.
func (c *Client) CSIDriverExists(ctx context.Context, name string) (bool, error) {
	_, err := c.Core.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return true, nil
	}
	if kindOf(err, false) == ErrNotFound {
		return false, nil
	}
	return false, wrap("reading csidriver "+name, err, false)
}
