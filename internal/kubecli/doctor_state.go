package kubecli

import (
	"context"
	"errors"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// storageCheck: the StorageClass the persistent dirs' PVCs will ask for
// exists ([cluster] storage_class, else the cluster's default). Reading
// StorageClasses is cluster-wide: without that right the line says
// "unknown".
func storageCheck(ctx context.Context, cfg *config.Config, c *kube.Client) check {
	what := "storage class"
	if name := cfg.Cluster.StorageClass; name != "" {
		p, err := c.StorageClass(ctx, name)
		switch {
		case errors.Is(err, kube.ErrNotFound):
			return check{"FAIL", what + " " + name, "not in the cluster ([cluster] storage_class): persistent dirs' volume claims will not bind"}
		case err != nil:
			return check{"WARN", what + " " + name, "unknown: " + err.Error()}
		}
		return check{"ok", what + " " + name, "provisioner " + p}
	}
	name, p, err := c.DefaultStorageClass(ctx)
	switch {
	case err != nil:
		return check{"WARN", what, "unknown: " + err.Error()}
	case name == "":
		return check{"WARN", what, "the cluster has no default StorageClass: profiles with persistent_dirs will not start; set [cluster] storage_class"}
	}
	return check{"ok", what, "default " + name + ", provisioner " + p}
}
