package statestore

import (
	"context"
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/adapter/userns"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/vault"
)

// FoldVerb is the argv[1] with which the lazaret binary, started as root
// of podman's user namespace (internal/adapter/userns), runs Fold and exits
// before main: a layer holds files of the sandbox's sub-uids and dirs the
// agent made unreadable, which only that root may move, and the fold
// reads and sets xattrs no shell tool of every host provides.
const FoldVerb = "__stateanchor-fold"

func init() {
	if len(os.Args) == 5 && os.Args[1] == FoldVerb {
		if err := Fold(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fmt.Fprintln(os.Stderr, "fold:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// FoldInNamespace runs Fold(upper, target, driver) as root of podman's
// user namespace, in the running lazaret binary.
func FoldInNamespace(ctx context.Context, pc *podman.Client, upper, target, driver string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("folding %s: %w", upper, err)
	}
	if _, err := userns.New(pc).Run(ctx, exe, FoldVerb, upper, target, driver); err != nil {
		return fmt.Errorf("folding %s into %s: %w", upper, target, err)
	}
	return nil
}

// FoldLayer moves each dir's upper of layer l into the profile's layer
// under root (Fold, as root of podman's user namespace), with the marks of
// the driver the profile's layer was made with. The caller holds the
// profile's lock exclusively and records the new head.
func FoldLayer(ctx context.Context, pc *podman.Client, root string, l Layer) error {
	for _, dir := range l.Dirs {
		od, err := vault.Open(root, domain.OverlayName(dir), true, 0o755)
		if err != nil {
			return err
		}
		od.Close()
		driver := "overlay"
		if rec, err := (Store{Root: root}).Record(dir); err == nil && rec != nil && rec.Driver != "" {
			driver = rec.Driver
		}
		upper, _, _ := LayerPaths(root, l.ID, dir)
		if err := FoldInNamespace(ctx, pc, upper, ProfileLayer(root, dir), driver); err != nil {
			return err
		}
	}
	return nil
}
