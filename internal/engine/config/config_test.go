package config

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testEnv points HOME and the XDG directories at a fresh temporary tree and
// returns its canonical root.
func testEnv(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"home", "data", "run", "cfg"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(root, "data"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(root, "run"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(root, "cfg"))
	return root
}

func parse(t *testing.T, doc string) (*Config, error) {
	t.Helper()
	return Parse("test.toml", []byte(doc))
}

func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := parse(t, doc)
	if err != nil {
		t.Fatalf("unexpected error: %v\n%s", err, doc)
	}
	return c
}

// wantErr parses doc and checks that the first error names key, contains
// msg, has the expected security flag, and is one line starting with
// "test.toml:<line>: <key>: ".
func wantErr(t *testing.T, doc, key, msg string, security bool) *Error {
	t.Helper()
	_, err := parse(t, doc)
	if err == nil {
		t.Fatalf("no error for:\n%s", doc)
	}
	errs := Errors(err)
	if len(errs) == 0 {
		t.Fatalf("error %T %v is not a *config.Error", err, err)
	}
	for _, e := range errs {
		if e.Key != key {
			continue
		}
		s := e.Error()
		if strings.ContainsAny(s, "\n\r") {
			t.Errorf("error is not one line: %q", s)
		}
		if e.Line <= 0 || !strings.HasPrefix(s, "test.toml:") || !strings.Contains(s, ": "+key+": ") {
			t.Errorf("error %q does not name file:line: key", s)
		}
		if !strings.Contains(e.Msg, msg) {
			t.Errorf("error %q does not contain %q", s, msg)
		}
		if e.IsSecurity != security || IsSecurity(err) != security {
			t.Errorf("error %q: IsSecurity = %v, want %v", s, e.IsSecurity, security)
		}
		return e
	}
	t.Fatalf("no error for key %s in %v", key, err)
	return nil
}

func TestDefaultsWithoutFile(t *testing.T) {
	root := testEnv(t)
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.File != "" {
		t.Errorf("File = %q, want empty for built-in defaults", c.File)
	}
	if want := filepath.Join(root, "data", "lazaret"); c.DataRoot != want {
		t.Errorf("DataRoot = %q, want %q", c.DataRoot, want)
	}
	if want := filepath.Join(root, "run", "lazaret"); c.Escalation.SocketDir != want {
		t.Errorf("SocketDir = %q, want %q", c.Escalation.SocketDir, want)
	}
	if _, err := os.Stat(c.Escalation.SocketDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load created the runtime dir (stat: %v)", err)
	}
	if !c.Escalation.Enabled {
		t.Error("escalation disabled by default")
	}
	p := c.Profiles[DefaultProfileName]
	if p == nil || p.Image != DefaultImage || !reflect.DeepEqual(p.PersistentDirs, DefaultPersistentDirs) {
		t.Fatalf("default profile = %+v", p)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings without a file: %v", c.Warnings)
	}
}

func TestDefaultDataRootUnderHome(t *testing.T) {
	root := testEnv(t)
	t.Setenv("XDG_DATA_HOME", "")
	c := mustParse(t, "")
	if want := filepath.Join(root, "home", ".local", "share", "lazaret"); c.DataRoot != want {
		t.Errorf("DataRoot = %q, want %q", c.DataRoot, want)
	}
}

func TestDefaultPath(t *testing.T) {
	root := testEnv(t)
	if p, _ := DefaultPath(); p != filepath.Join(root, "cfg", "lazaret", "config.toml") {
		t.Errorf("DefaultPath = %q", p)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	if p, _ := DefaultPath(); p != filepath.Join(root, "home", ".config", "lazaret", "config.toml") {
		t.Errorf("DefaultPath without XDG_CONFIG_HOME = %q", p)
	}
}

func TestLoadExplicitMissingFile(t *testing.T) {
	root := testEnv(t)
	missing := filepath.Join(root, "nope.toml")
	_, err := Load(missing)
	var e *Error
	if !errors.As(err, &e) || e.File != missing || !strings.Contains(e.Error(), "no such file") {
		t.Fatalf("Load(missing) = %v", err)
	}
}

func TestLoadReadsFile(t *testing.T) {
	root := testEnv(t)
	f := filepath.Join(root, "c.toml")
	if err := os.WriteFile(f, []byte("[profiles.claude]\nimage = \"docker.io/library/node:22\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.File != f || c.Profiles["claude"].Image != "docker.io/library/node:22" || c.Profiles["default"] == nil {
		t.Fatalf("Load = %+v", c)
	}
}

func TestProfileNames(t *testing.T) {
	testEnv(t)
	for _, name := range []string{"ab", "claude", "a_b-1", "00", strings.Repeat("a", 32), "net", "netd", "spare", "gate", "domains_"} {
		mustParse(t, "[profiles."+name+"]\nimage = \"x:1\"\n")
	}
	for _, name := range []string{`"../x"`, `"a.b"`, strings.Repeat("a", 33), "A1", "a", `""`, `"a/b"`, `"a b"`, "Claude", `"é1"`, "domains"} {
		unquoted := strings.Trim(name, `"`)
		key := keyPath{"profiles", unquoted}.String()
		wantErr(t, "\n[profiles."+name+"]\nimage = \"x:1\"\n", key, "invalid profile name", false)
	}
	// Rejected before use: a bad profile is not in the result even partially.
	if err := ValidProfileName("../x"); err == nil {
		t.Error("ValidProfileName accepted ../x")
	}
}

func TestHomeExpansion(t *testing.T) {
	root := testEnv(t)
	home := filepath.Join(root, "home")
	tk := Tokens{ProfileName: "claude", DataRoot: filepath.Join(root, "data"), DomainHash: "0123456789ab", WorkspaceDir: "/w"}
	for in, want := range map[string]string{
		"~":                       home,
		"~/x":                     filepath.Join(home, "x"),
		"~/a/b/":                  filepath.Join(home, "a", "b"),
		"/abs/some/~":             "/abs/some/~",
		"{profile_dir}/some/~":    filepath.Join(root, "data", "claude", "some", "~"),
		"{profile_dir}/~/x":       filepath.Join(root, "data", "claude", "~", "x"),
		"{profile_dir}/x~y":       filepath.Join(root, "data", "claude", "x~y"),
		"~/{profile_name}/cache/": filepath.Join(home, "claude", "cache"),
	} {
		got, err := ExpandPath(in, tk)
		if err != nil || got != want {
			t.Errorf("ExpandPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"~user/x", "~root", "~~/x", "some/~"} {
		if got, err := ExpandPath(in, tk); err == nil {
			t.Errorf("ExpandPath(%q) = %q, want an error", in, got)
		}
	}
	wantErr(t, "data_root = \"~user/x\"\n", "data_root", "~user is not supported", false)
}

func TestHomeFromPasswdWhenHOMEEmpty(t *testing.T) {
	testEnv(t)
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		t.Skip("no passwd entry for the current user")
	}
	t.Setenv("HOME", "")
	got, err := expandHome("~/x")
	if err != nil || got != u.HomeDir+"/x" {
		t.Fatalf("expandHome with empty HOME = %q, %v; want %q", got, err, u.HomeDir+"/x")
	}
}

func TestTokens(t *testing.T) {
	root := testEnv(t)
	data := filepath.Join(root, "data")
	tk := Tokens{ProfileName: "claude", DataRoot: data, DomainHash: "0123456789ab", WorkspaceDir: "/srv/proj"}
	for in, want := range map[string]string{
		"/x/{profile_name}":             "/x/claude",
		"{profile_dir}/home":            data + "/claude/home",
		"/c/{domain_hash}":              "/c/0123456789ab",
		"{domain_dir}/cache":            data + "/domains/0123456789ab/cache",
		"{workspace_dir}/node":          "/srv/proj/node",
		"/{profile_name}-{domain_hash}": "/claude-0123456789ab",
	} {
		got, err := ExpandPath(in, tk)
		if err != nil || got != want {
			t.Errorf("ExpandPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"/x/{unknown}", "/x/{data_root}", "/x/{", "/x/}", "/x/{profile_dir", "/x/{{profile_name}}", "/x/{}", "/x/{PROFILE_NAME}"} {
		if got, err := ExpandPath(in, tk); err == nil {
			t.Errorf("ExpandPath(%q) = %q, want an error", in, got)
		}
	}
	// Token syntax is checked at load time, without a domain.
	e := wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"{profile_dir}/{unknown}\", container = \"/c\"}]\n",
		"profiles.claude.volumes[0].host", "unknown token {unknown}", false)
	if e.Line != 3 {
		t.Errorf("line = %d, want 3", e.Line)
	}
}

func TestDotDotIsSecurityError(t *testing.T) {
	testEnv(t)
	tk := Tokens{ProfileName: "claude", DataRoot: "/d", DomainHash: "0123456789ab", WorkspaceDir: "/w"}
	for _, in := range []string{"{profile_dir}/../../etc", "/a/../b", "~/..", "/a/..", "{workspace_dir}/../x"} {
		_, err := ExpandPath(in, tk)
		var re *ruleError
		if !errors.As(err, &re) || !re.security {
			t.Errorf("ExpandPath(%q) = %v, want a security error", in, err)
		}
	}
	// Positive control: the same strings without ".." are accepted, and
	// names that merely contain dots are not segments.
	for _, in := range []string{"{profile_dir}/etc", "/a/..b", "/a/b..", "/a/.../b"} {
		if _, err := ExpandPath(in, tk); err != nil {
			t.Errorf("ExpandPath(%q) = %v", in, err)
		}
	}
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"{profile_dir}/../../etc\", container = \"/c\"}]\n",
		"profiles.claude.volumes[0].host", "'..'", true)
	wantErr(t, "data_root = \"/srv/../etc\"\n", "data_root", "'..'", true)
}

func TestCanonicalize(t *testing.T) {
	root := testEnv(t)
	real := filepath.Join(root, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		link:                         real,
		link + "/sub":                real + "/sub",
		link + "/sub/new/deeper":     real + "/sub/new/deeper",
		filepath.Join(root, "fresh"): filepath.Join(root, "fresh"),
	} {
		if got, err := canonicalize(in); err != nil || got != want {
			t.Errorf("canonicalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	dangling := filepath.Join(root, "dangling")
	if err := os.Symlink(filepath.Join(root, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	if got, err := canonicalize(dangling + "/x"); err == nil {
		t.Errorf("canonicalize through a dangling symlink = %q, want an error", got)
	}
}

func TestVolumeHostSymlinkToRootRefused(t *testing.T) {
	root := testEnv(t)
	link := filepath.Join(root, "rootlink")
	if err := os.Symlink("/", link); err != nil {
		t.Fatal(err)
	}
	doc := "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"" + link + "\", container = \"/h\"}]\n"
	wantErr(t, doc, "profiles.claude.volumes[0].host", "host root", true)

	// Positive control: the string check alone passes this path (it has
	// no ".." and is not "/"); only canonicalization reveals it is /.
	if p, err := expandString(link, Tokens{}.value); err != nil || p == "/" {
		t.Fatalf("expandString(%q) = %q, %v", link, p, err)
	}
	if p, _ := canonicalize(link); p != "/" {
		t.Fatalf("canonicalize(%q) = %q, want /", link, p)
	}
	// ...and a real directory in its place is accepted.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(link, 0o755); err != nil {
		t.Fatal(err)
	}
	mustParse(t, doc)
}

func TestMountSourceRefusals(t *testing.T) {
	root := testEnv(t)
	c := mustParse(t, "")
	g := newHostGuard(c.DataRoot, filepath.Join(root, "etc", "lz.toml"))
	refused := []string{"/", "/proc", "/proc/1/root", "/sys/fs", "/dev", "/dev/shm", "/run", "/run/user/1000",
		filepath.Join(root, "run"), filepath.Join(root, "run", "lazaret", "x"),
		root, filepath.Join(root, "data"), filepath.Join(root, "data", "lazaret"), filepath.Join(root, "home"),
		filepath.Join(root, "cfg"), filepath.Join(root, "cfg", "lazaret"), filepath.Join(root, "cfg", "lazaret", "x"),
		filepath.Join(root, "etc"), filepath.Join(root, "etc", "lz.toml")}
	for _, p := range refused {
		if err := g.checkMountSource(p); err == nil {
			t.Errorf("checkMountSource(%q) accepted", p)
		} else if re := (*ruleError)(nil); !errors.As(err, &re) || !re.security {
			t.Errorf("checkMountSource(%q) = %v, not a security error", p, err)
		}
	}
	for _, p := range []string{filepath.Join(root, "data", "lazaret", "claude", "home"), filepath.Join(root, "home", "cache"), filepath.Join(root, "etc", "sub"), "/srv/data", "/usr/share/doc", "/devices", "/running"} {
		if err := g.checkMountSource(p); err != nil {
			t.Errorf("checkMountSource(%q) = %v", p, err)
		}
	}
}

func TestResolveVolumes(t *testing.T) {
	root := testEnv(t)
	ws := filepath.Join(root, "proj")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, `[profiles.claude]
image = "x:1"
volumes = [
  { host = "{profile_dir}/home", container = "/root", mode = "z" },
  { host = "{domain_dir}/cache", container = "/cache", mode = "ro,Z" },
  { host = "{workspace_dir}/node_modules", container = "/nm" },
  { host = "/srv/{profile_name}-{domain_hash}", container = "/srv", mode = "rw" },
]
`)
	tk := Tokens{ProfileName: "claude", DataRoot: c.DataRoot, DomainHash: "0123456789ab", WorkspaceDir: ws}
	got, err := c.Profiles["claude"].ResolveVolumes(tk)
	if err != nil {
		t.Fatal(err)
	}
	want := []ResolvedVolume{
		{Host: c.DataRoot + "/claude/home", Container: "/root", Options: []string{"z"}},
		{Host: c.DataRoot + "/domains/0123456789ab/cache", Container: "/cache", ReadOnly: true, Options: []string{"Z"}},
		{Host: ws + "/node_modules", Container: "/nm"},
		{Host: "/srv/claude-0123456789ab", Container: "/srv"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ResolveVolumes =\n%+v\nwant\n%+v", got, want)
	}

	// Sources that only a concrete domain reveals as dangerous.
	for _, host := range []string{"{workspace_dir}", "{workspace_dir}/.git", "{workspace_dir}/.git/hooks", "{domain_dir}",
		"{domain_dir}/state.db", "{domain_dir}/workspace", "{domain_dir}/overlay/usr", "{domain_dir}/coordinator.log"} {
		c := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \""+host+"\", container = \"/v\"}]\n")
		_, err := c.Profiles["claude"].ResolveVolumes(tk)
		if !IsSecurity(err) || !strings.HasPrefix(err.Error(), "test.toml:3: profiles.claude.volumes[0].host: ") {
			t.Errorf("ResolveVolumes(%s) = %v, want a security error naming the key", host, err)
		}
	}
	// Without tokens the domain checks are the only guard: a plain
	// volume of the workspace path itself is refused too.
	c3 := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \""+ws+"\", container = \"/v\"}]\n")
	if _, err := c3.Profiles["claude"].ResolveVolumes(tk); !IsSecurity(err) {
		t.Errorf("ResolveVolumes(workspace by path) = %v", err)
	}
}

func TestLoadRefusesHugeAndForeignFiles(t *testing.T) {
	root := testEnv(t)
	big := filepath.Join(root, "big.toml")
	if err := os.WriteFile(big, []byte(strings.Repeat("# x\n", maxConfigSize/4+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(big) = %v", err)
	}
	ww := filepath.Join(root, "ww.toml")
	if err := os.WriteFile(ww, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ww); err != nil {
		t.Fatalf("positive control: %v", err)
	}
	if err := os.Chmod(ww, 0o646); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ww); !IsSecurity(err) {
		t.Errorf("world-writable config: %v", err)
	}
}

func TestLoadDataRoot(t *testing.T) {
	root := testEnv(t)
	write := func(body string) string {
		f := filepath.Join(t.TempDir(), "c.toml")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	dr := filepath.Join(root, "data")
	// A profile error: Load refuses the file (the control), LoadDataRoot
	// gives data_root and the error as a warning naming its line.
	broken := write("data_root = \"" + dr + "\"\n[profiles.aa]\nimage = \"x:1\"\nnetwork = \"sideways\"\n")
	if _, err := Load(broken); err == nil {
		t.Fatal("Load accepted a broken profile")
	}
	c, err := LoadDataRoot(broken)
	if err != nil {
		t.Fatalf("LoadDataRoot: %v", err)
	}
	if c.DataRoot != dr || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], broken+":4") {
		t.Fatalf("LoadDataRoot = %q, warnings %q", c.DataRoot, c.Warnings)
	}
	// What says where the data is stays an error, as do syntax errors.
	for _, body := range []string{
		"data_root = \"relative/dir\"\n[profiles.aa]\nimage = \"x:1\"\nnetwork = \"sideways\"\n",
		"[escalation]\nsocket_dir = \"relative\"\n",
		"data_root = \n",
		"[profiles.aa\n",
	} {
		if _, err := LoadDataRoot(write(body)); err == nil {
			t.Errorf("LoadDataRoot accepted %q", body)
		}
	}
	if c, err := LoadDataRoot(write("data_root = \"" + dr + "\"\n")); err != nil || c.DataRoot != dr || len(c.Warnings) != 0 {
		t.Errorf("a valid file: %v, %+v", err, c)
	}
}
