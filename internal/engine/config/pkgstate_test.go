package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestPackageState: a profile that persists /usr persists the package
// database that describes it, whatever else it lists, except where an
// entry or volume already covers it, stands in its way (warned), or the
// profile opts out.
func TestPackageState(t *testing.T) {
	testEnv(t)
	cases := []struct {
		name, extra string
		want        []string
		added       []string
		warn        string // a warning containing this, "" for none
		note        string // PackageStateNote containing this, "" for none
	}{
		{name: "usr only (the README's old example)", extra: `persistent_dirs = ["/usr"]`,
			want: []string{"/usr", "/var/lib/dpkg", "/var/lib/apt"}, added: PackageStateDirs, note: "persisting /var/lib/dpkg and /var/lib/apt with /usr"},
		{name: "usr and opt", extra: `persistent_dirs = ["/usr", "/opt"]`,
			want: []string{"/usr", "/opt", "/var/lib/dpkg", "/var/lib/apt"}, added: PackageStateDirs, note: "persisting"},
		{name: "usr/local: dpkg never installs there", extra: `persistent_dirs = ["/usr/local"]`,
			want: []string{"/usr/local"}},
		{name: "var listed", extra: `persistent_dirs = ["/usr", "/var"]`,
			want: []string{"/usr", "/var"}},
		{name: "var/lib listed", extra: `persistent_dirs = ["/var/lib", "/usr"]`,
			want: []string{"/var/lib", "/usr"}},
		{name: "dpkg listed, apt not", extra: `persistent_dirs = ["/usr", "/var/lib/dpkg"]`,
			want: []string{"/usr", "/var/lib/dpkg", "/var/lib/apt"}, added: []string{"/var/lib/apt"}, note: "persisting /var/lib/apt with /usr"},
		{name: "dpkg alone, no usr", extra: `persistent_dirs = ["/var/lib/dpkg"]`,
			want: []string{"/var/lib/dpkg"}},
		{name: "the default written out", extra: `persistent_dirs = ["/usr", "/var/lib/dpkg", "/var/lib/apt"]`,
			want: DefaultPersistentDirs},
		{name: "absent key", want: DefaultPersistentDirs},
		{name: "none", extra: `persistent_dirs = []`, want: nil},
		{name: "opt-out", extra: "persistent_dirs = [\"/usr\"]\npersist_package_db = false",
			want: []string{"/usr"}, note: "without its package database"},
		{name: "opt-out, default dirs", extra: "persist_package_db = false",
			want: []string{"/usr"}, note: "without its package database"},
		{name: "opt-out with the database listed", extra: "persistent_dirs = [\"/usr\", \"/var\"]\npersist_package_db = false",
			want: []string{"/usr", "/var"}},
		{name: "opt-in written", extra: "persistent_dirs = [\"/usr\"]\npersist_package_db = true",
			want: []string{"/usr", "/var/lib/dpkg", "/var/lib/apt"}, added: PackageStateDirs, note: "persisting"},
		{name: "an entry inside dpkg's", extra: `persistent_dirs = ["/usr", "/var/lib/dpkg/info"]`,
			want: []string{"/usr", "/var/lib/dpkg/info", "/var/lib/apt"}, added: []string{"/var/lib/apt"},
			warn: "/usr persists without /var/lib/dpkg", note: "persisting /var/lib/apt"},
		{name: "a volume at apt's", extra: "persistent_dirs = [\"/usr\"]\nvolumes = [{ host = \"/srv\", container = \"/var/lib/apt\" }]",
			want: []string{"/usr", "/var/lib/dpkg"}, added: []string{"/var/lib/dpkg"}, note: "persisting /var/lib/dpkg with"},
		{name: "a volume on /var", extra: "persistent_dirs = [\"/usr\"]\nvolumes = [{ host = \"/srv\", container = \"/var\" }]",
			want: []string{"/usr"}},
		{name: "a volume inside apt's", extra: "persistent_dirs = [\"/usr\"]\nvolumes = [{ host = \"/srv\", container = \"/var/lib/apt/lists\" }]",
			want: []string{"/usr", "/var/lib/dpkg"}, added: []string{"/var/lib/dpkg"}, warn: "volume \"/var/lib/apt/lists\"", note: "persisting /var/lib/dpkg with"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\n"+tc.extra+"\n")
			p := c.Profiles["claude"]
			if !reflect.DeepEqual(p.PersistentDirs, tc.want) {
				t.Errorf("dirs = %q, want %q", p.PersistentDirs, tc.want)
			}
			if !reflect.DeepEqual(p.PackageDirsAdded, tc.added) {
				t.Errorf("added = %q, want %q", p.PackageDirsAdded, tc.added)
			}
			ws := strings.Join(c.Warnings, "\n")
			if (tc.warn == "") != (ws == "") || !strings.Contains(ws, tc.warn) {
				t.Errorf("warnings = %q, want one with %q", ws, tc.warn)
			}
			if ws != "" && !strings.Contains(ws, "profiles.claude.persistent_dirs: ") {
				t.Errorf("warning does not name the key: %q", ws)
			}
			note := p.PackageStateNote()
			if (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
				t.Errorf("note = %q, want one with %q", note, tc.note)
			}
		})
	}
	// The built-in default profile lists the database: nothing to say.
	if n := mustParse(t, "").Profiles[DefaultProfileName].PackageStateNote(); n != "" {
		t.Errorf("built-in default: note %q", n)
	}
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\npersist_package_db = \"no\"\n", "profiles.claude.persist_package_db", "boolean", false)
}
