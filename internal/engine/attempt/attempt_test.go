package attempt

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

func anchor(t *testing.T) *domain.Anchor {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := domain.New("default", ws, filepath.Join(base, "data"), filepath.Join(base, "run"), "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestWriteOpenList(t *testing.T) {
	p := anchor(t)
	for _, n := range []string{"b", "a"} {
		a, err := p.ForAttempt(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := Write(a, Record{Name: n, Profile: a.Profile, Workspace: a.Workspace, Hash: a.Hash, Parent: p.Hash, Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := Open(p, "a")
	if err != nil || a.Attempt != "a" || a.Hash == p.Hash || a.AgentBranch() != "lazaret/agent-default.a" {
		t.Fatalf("Open: %+v %v", a, err)
	}
	if _, err := Open(p, "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a missing attempt: %v", err)
	}
	// Another workspace's attempt, a record copied under a wrong hash and
	// a half-made one (no record) are not listed.
	other := anchor(t)
	other.DataRoot = p.DataRoot
	o, _ := other.ForAttempt("z")
	_ = Write(o, Record{Name: "z", Profile: o.Profile, Workspace: o.Workspace, Hash: o.Hash, Parent: other.Hash})
	_ = os.MkdirAll(filepath.Join(p.DomainsDir(), "0123456789ab"), 0o700)
	b, _ := os.ReadFile(filepath.Join(p.DomainsDir(), a.Hash, "attempt.json"))
	_ = os.MkdirAll(filepath.Join(p.DomainsDir(), "ffffffffffff"), 0o700)
	_ = os.WriteFile(filepath.Join(p.DomainsDir(), "ffffffffffff", "attempt.json"), b, 0o600)
	rs, err := List(p)
	if err != nil || len(rs) != 2 || rs[0].Name != "a" || rs[1].Name != "b" {
		t.Fatalf("List: %+v %v", rs, err)
	}
}

func TestNames(t *testing.T) {
	if n, err := Names("try", 1); err != nil || len(n) != 1 || n[0] != "try" {
		t.Fatalf("%v %v", n, err)
	}
	if n, err := Names("try", 3); err != nil || len(n) != 3 || n[2] != "try-3" {
		t.Fatalf("%v %v", n, err)
	}
	for _, bad := range []string{"", "Try", "a/b", "-x", "x-", "a..b", "a b", "x\x1b", "abcdefghijabcdefghijabcdefghijabc"} {
		if _, err := Names(bad, 1); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := Names("abcdefghijabcdefghijabcdefghijab", 2); err == nil {
		t.Error("a name too long with its suffix accepted")
	}
	if _, err := Names("x", 0); err == nil {
		t.Error("-n 0 accepted")
	}
}

func TestHashesDiffer(t *testing.T) {
	p := anchor(t)
	a, _ := p.ForAttempt("a")
	if a.Hash == p.Hash || a.Container() == p.Container() || a.Root() == p.Root() || a.Parent().Hash != p.Hash {
		t.Fatalf("attempt %+v shares names with %+v", a, p)
	}
}
