package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// TestReserveErrors: a disk_reserve at least as large as the data root's
// filesystem is one line naming the key, its file and line, once per key
// (a global reserve every profile inherits, once); control: the same
// file on a filesystem that can keep it passes.
func TestReserveErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	doc := `data_root = "` + filepath.Join(dir, "data") + `"

[resources]
disk_reserve = "8g"

[profiles.big]
image = "a:1"
disk_reserve = "20g"

[profiles.small]
image = "a:1"
disk_reserve = "1g"

[profiles.other]
image = "a:1"
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(file, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var asked string
	size := func(n uint64) func(string) (uint64, error) {
		return func(p string) (uint64, error) { asked = p; return n, nil }
	}
	errs := reserveErrors(cfg, size(8<<30))
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		file + ":8: profiles.big.disk_reserve: disk_reserve 20g is larger than the filesystem (8g), which holds the data root " + cfg.DataRoot,
		file + ":4: resources.disk_reserve: disk_reserve 8g is larger than the filesystem (8g), which holds the data root " + cfg.DataRoot,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if asked != cfg.DataRoot {
		t.Errorf("statfs of %q, want the data root", asked)
	}
	if errs := reserveErrors(cfg, size(100<<30)); len(errs) != 0 {
		t.Errorf("a 100 GiB filesystem: %v", errs)
	}
	// A filesystem that cannot be read is the start's to report.
	if errs := reserveErrors(cfg, func(string) (uint64, error) { return 0, errors.New("EIO") }); len(errs) != 0 {
		t.Errorf("unreadable: %v", errs)
	}
}

// TestReserveErrorsBuiltIn: the built-in 5% (a 1 GiB floor, at most half
// the disk) fits even a tiny filesystem.
func TestReserveErrorsBuiltIn(t *testing.T) {
	cfg, err := config.Parse("", []byte("data_root = \"/tmp/lazaret-test-data\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if errs := reserveErrors(cfg, func(string) (uint64, error) { return 100 << 20, nil }); len(errs) != 0 {
		t.Errorf("built-in reserve on 100 MiB: %v", errs)
	}
}

// TestFsSize: a data root not made yet is on its nearest existing
// ancestor's filesystem.
func TestFsSize(t *testing.T) {
	dir := t.TempDir()
	want, err := fsSize(dir)
	if err != nil || want == 0 {
		t.Fatalf("fsSize(%s) = %d, %v", dir, want, err)
	}
	got, err := fsSize(filepath.Join(dir, "not", "yet"))
	if err != nil || got != want {
		t.Errorf("missing data root: %d, %v; want %d", got, err, want)
	}
}

func TestKeyLine(t *testing.T) {
	doc := []byte("a = 1\nprofiles.x.disk_reserve = \"1g\"\n[profiles.y]\nimage = \"i\"\n\ndisk_reserve = \"2g\"\n")
	for _, c := range []struct {
		key  []string
		want int
	}{{[]string{"profiles", "x", "disk_reserve"}, 2}, {[]string{"profiles", "y", "disk_reserve"}, 6}, {[]string{"resources", "disk_reserve"}, 0}} {
		if got := keyLine(doc, c.key); got != c.want {
			t.Errorf("%v: line %d, want %d", c.key, got, c.want)
		}
	}
}
