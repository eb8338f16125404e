package kube

import (
	"context"
	"errors"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
)

// TestEnsurePVCKeepsExisting: the second Ensure finds the first PVC and
// does not replace it (another size asked later changes nothing).
func TestEnsurePVCKeepsExisting(t *testing.T) {
	c := fakeClient()
	ctx := context.Background()
	pvc, err := kubespec.StatePVC(kubespec.StateInput{Profile: "pp", Size: "1Gi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := c.EnsurePVC(ctx, pvc); err != nil || !created {
		t.Fatalf("first: created %v, %v", created, err)
	}
	bigger, _ := kubespec.StatePVC(kubespec.StateInput{Profile: "pp", Size: "5Gi"})
	got, created, err := c.EnsurePVC(ctx, bigger)
	if err != nil || created {
		t.Fatalf("second: created %v, %v", created, err)
	}
	if q := got.Spec.Resources.Requests["storage"]; q.String() != "1Gi" {
		t.Errorf("existing PVC changed to %v", q.String())
	}
	l, err := c.PVCs(ctx, kubespec.ManagedSelector)
	if err != nil || len(l) != 1 {
		t.Fatalf("list %d, %v", len(l), err)
	}
	for i := 0; i < 2; i++ {
		if err := c.DeletePVC(ctx, pvc.Name); err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
	}
	if _, err := c.PVC(ctx, pvc.Name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}
