package kube

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/deptest"
)

// TestOnlyImporterOfClientGo: internal/adapter/kube (and its tests' stand-in
// cluster, kubetest) is the one package that imports client-go; every
// other talks to the cluster through it.
func TestOnlyImporterOfClientGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../../...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	allowed := map[string]bool{deptest.Module + "/internal/adapter/kube": true, deptest.Module + "/internal/adapter/kube/kubetest": true}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, imp := range strings.Fields(imports) {
			if !strings.HasPrefix(imp, "k8s.io/client-go/") {
				continue
			}
			found = found || allowed[pkg]
			if !allowed[pkg] {
				t.Errorf("%s imports %s: only internal/adapter/kube talks to the API server", pkg, imp)
			}
		}
	}
	if !found {
		t.Error("internal/adapter/kube imports no client-go package: the check sees nothing (positive control)")
	}
}
