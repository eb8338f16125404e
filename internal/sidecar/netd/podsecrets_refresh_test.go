package netd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// TestRefreshPodSecrets: a value file the kubelet replaced reaches the
// injector once; an unchanged one, an unreadable one and a value the
// injector refuses do not. Control: the first read only records.
func TestRefreshPodSecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) {
		f, err := netdapi.PodSecretValueFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	write("alpha", "v1")
	write("beta", "b1")
	last := map[string]string{}
	var got []string
	set := func(name, v string) error {
		if v == "refused" {
			return errors.New("invalid value")
		}
		got = append(got, name+"="+v)
		return nil
	}
	if ch := refreshPodSecrets(dir, []string{"alpha", "beta", "gone"}, last, set); len(ch) != 0 || len(got) != 0 {
		t.Fatalf("first read set %v (%v): it should only record", got, ch)
	}
	_ = os.Remove(filepath.Join(dir, mustFile(t, "alpha")))
	write("alpha", "v2")
	if ch := refreshPodSecrets(dir, []string{"alpha", "beta", "gone"}, last, set); !slices.Equal(ch, []string{"alpha"}) || !slices.Equal(got, []string{"alpha=v2"}) {
		t.Fatalf("after a change: changed %v, set %v", ch, got)
	}
	if ch := refreshPodSecrets(dir, []string{"alpha", "beta"}, last, set); len(ch) != 0 {
		t.Fatalf("nothing changed, yet %v", ch)
	}
	_ = os.Remove(filepath.Join(dir, mustFile(t, "beta")))
	write("beta", "refused")
	if ch := refreshPodSecrets(dir, []string{"beta"}, last, set); len(ch) != 0 || last["beta"] != "b1" {
		t.Fatalf("a refused value: changed %v, kept %q", ch, last["beta"])
	}
}

func mustFile(t *testing.T, name string) string {
	f, err := netdapi.PodSecretValueFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
