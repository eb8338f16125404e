package clicore

import (
	"errors"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/clicore/keeper"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
)

// TestChooseKeptPerBackend: each CLI attaches only its own backend's kept
// sessions; a prefix picks one, the workspace's profile picks one, two
// matches are a usage error listing them, none a one-line error naming
// the ps of the user's invocation.
func TestChooseKeptPerBackend(t *testing.T) {
	all := []keeper.Info{
		{ID: "aaaa00000000", Session: "1111", Profile: "default", Workspace: "/w"},
		{ID: "bbbb00000000", Session: "2222", Profile: "default", Workspace: "/w", Backend: "kubernetes"},
		{ID: "cccc00000000", Session: "2233", Profile: "dev", Workspace: "/w", Backend: "kubernetes"},
	}
	kube := ofBackend(all, "kubernetes")
	if len(kube) != 2 || len(ofBackend(all, "")) != 1 {
		t.Fatalf("ofBackend: %+v", kube)
	}
	inv := "lazaret --backend kubernetes"
	if i, err := ChooseKept(kube, inv, "default", "/w", ""); err != nil || i.ID != "bbbb00000000" {
		t.Fatalf("by workspace: %+v %v", i, err)
	}
	// Control: the same choice among every backend's sessions is ambiguous.
	if _, err := ChooseKept(all, inv, "default", "/w", ""); err == nil {
		t.Fatal("two sessions of one workspace chose one")
	}
	if i, err := ChooseKept(kube, inv, "", "", "2233"); err != nil || i.Profile != "dev" {
		t.Fatalf("by prefix: %+v %v", i, err)
	}
	var he *HintError
	if _, err := ChooseKept(kube, inv, "", "", "22"); !errors.As(err, &he) || he.Code != exitcode.Usage || !strings.Contains(err.Error(), "2233") {
		t.Fatalf("two matches: %v", err)
	}
	if _, err := ChooseKept(kube, inv, "", "", "1111"); !errors.As(err, &he) || he.Code != exitcode.Failure || !strings.Contains(he.Hint, inv+" ps") {
		t.Fatalf("the local session was attachable from the cluster's CLI: %v", err)
	}
	if got := AttachLine(inv, keeper.Info{ID: "cccc00000000", Profile: "dev"}); got != "`lazaret --backend kubernetes attach dev cccc00000000`" {
		t.Errorf("AttachLine = %s", got)
	}
}
