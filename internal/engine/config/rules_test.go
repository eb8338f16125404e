package config

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestNULBytesRejected(t *testing.T) {
	testEnv(t)
	cases := []struct{ doc, key string }{
		{"data_root = \"/srv/a\\u0000b\"\n", "data_root"},
		{"[profiles.claude]\nimage = \"x\\u0000:1\"\n", "profiles.claude.image"},
		{"[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"/srv/\\u0000\", container = \"/c\"}]\n", "profiles.claude.volumes[0].host"},
		{"[profiles.claude]\nimage = \"x:1\"\nenv = {A = \"x\\u0000\"}\n", "profiles.claude.env.A"},
		{"[escalation]\nauto_approve = [\"make\\u0000 lint\"]\n", "escalation.auto_approve[0]"},
		{"[profiles.\"a\\u0000b\"]\nimage = \"x:1\"\n", `profiles."a\x00b"`},
	}
	for _, c := range cases {
		e := wantErr(t, c.doc, c.key, "NUL", true)
		if strings.ContainsRune(e.Error(), 0) {
			t.Errorf("error carries a raw NUL: %q", e.Error())
		}
	}
	// A raw NUL byte in the file is a syntax error, still one line.
	_, err := parse(t, "data_root = \"/a\x00\"\n")
	if err == nil || strings.ContainsAny(err.Error(), "\n\x00") || !strings.HasPrefix(err.Error(), "test.toml:1:") {
		t.Errorf("raw NUL: %q", err)
	}
}

func TestCIDRs(t *testing.T) {
	testEnv(t)
	c := mustParse(t, `[network]
allow_egress = ["140.82.112.0/20", "10.1.2.3/8", "192.0.2.7", "2001:db8::1/32", "2001:DB8::/32", "::1"]
[profiles.claude]
image = "x:1"
allow_egress = ["160.79.104.0/23", "10.0.0.0/8"]
`)
	want := []netip.Prefix{
		netip.MustParsePrefix("140.82.112.0/20"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("::1/128"),
	}
	if !reflect.DeepEqual(c.Network.AllowEgress, want) {
		t.Errorf("global AllowEgress = %v, want %v", c.Network.AllowEgress, want)
	}
	wantProfile := append(append([]netip.Prefix{}, want...), netip.MustParsePrefix("160.79.104.0/23"))
	if got := c.Profiles["claude"].AllowEgress; !reflect.DeepEqual(got, wantProfile) {
		t.Errorf("profile AllowEgress = %v, want %v (merged, deduplicated)", got, wantProfile)
	}
	if got := c.Profiles["default"].AllowEgress; !reflect.DeepEqual(got, want) {
		t.Errorf("default profile AllowEgress = %v", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "2001:db8::/129", "10.0.0", "example.com", "::ffff:1.2.3.4/128", "fe80::1%eth0", "10.0.0.0/-1", ""} {
		wantErr(t, "[network]\nallow_egress = [\"1.1.1.1\", \""+bad+"\"]\n", "network.allow_egress[1]", "invalid CIDR", false)
	}
	e := wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nallow_egress = [\"10.0.0.0/33\"]\n", "profiles.claude.allow_egress[0]", "10.0.0.0/33", false)
	if e.Line != 3 {
		t.Errorf("line %d, want 3", e.Line)
	}
	c = mustParse(t, "[network]\nallow_egress = [\"0.0.0.0/0\"]\n")
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "every IPv4") {
		t.Errorf("0.0.0.0/0 warnings = %v", c.Warnings)
	}
}

func TestAllowDomains(t *testing.T) {
	testEnv(t)
	for _, ok := range []string{"api.anthropic.com", "registry.npmjs.org", "*.githubusercontent.com", "localhost", "a-b.c0.io", "xn--bcher-kva.example"} {
		if err := checkDomainName(ok); err != nil {
			t.Errorf("checkDomainName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"API.anthropic.com", "1.2.3.4", "::1", "[::1]", "*", "*.com", "a.*.com", "-a.com", "a-.com", "a..com", ".a.com", "a.com.", "a_b.com", "a b.com", "1.2.3", "", strings.Repeat("a", 64) + ".com", "a.com/x", "a.com:443"} {
		if err := checkDomainName(bad); err == nil {
			t.Errorf("checkDomainName(%q) accepted", bad)
		}
	}
	c := mustParse(t, "[network]\nallow_domains = [\"a.example\"]\n[profiles.claude]\nimage = \"x:1\"\nallow_domains = [\"b.example\", \"a.example\"]\n")
	if got := c.Profiles["claude"].AllowDomains; !reflect.DeepEqual(got, []string{"a.example", "b.example"}) {
		t.Errorf("merged AllowDomains = %v", got)
	}
	wantErr(t, "[network]\nallow_domains = [\"ok.example\", \"10.0.0.1\"]\n", "network.allow_domains[1]", "IP address", false)
}

func TestEnv(t *testing.T) {
	testEnv(t)
	t.Setenv("LZ_TEST_SECRET", "s3cret")
	os.Unsetenv("UNSET_VAR")
	c := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\nenv = { KEY = \"env:LZ_TEST_SECRET\", TERM = \"xterm-256color\", EMPTY = \"\" }\n")
	if got := c.Profiles["claude"].Env; !reflect.DeepEqual(got, map[string]string{"KEY": "s3cret", "TERM": "xterm-256color", "EMPTY": ""}) {
		t.Errorf("Env = %v", got)
	}
	// An unset host variable does not make the file invalid (stop, status
	// and audit must work without the agent's keys in the shell); it is
	// reported, with file, line and key, when a sandbox starts.
	c = mustParse(t, "[profiles.claude]\nimage = \"x:1\"\nenv = {X = \"env:UNSET_VAR\", KEY = \"env:LZ_TEST_SECRET\"}\n")
	e := c.Profiles["claude"].CheckEnv()
	if e == nil || !strings.Contains(e.Error(), "profiles.claude.env.X") || !strings.Contains(e.Error(), "UNSET_VAR is not set") || !strings.Contains(e.Error(), ":3:") {
		t.Errorf("CheckEnv = %v", e)
	}
	if e != nil && strings.Contains(e.Error(), "s3cret") {
		t.Error("error leaks a secret")
	}
	if err := c.Profiles[DefaultProfileName].CheckEnv(); err != nil {
		t.Errorf("default profile CheckEnv = %v", err)
	}
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nenv = {\"1X\" = \"a\"}\n", `profiles.claude.env.1X`, "invalid environment variable name", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nenv = {\"A-B\" = \"a\"}\n", `profiles.claude.env.A-B`, "invalid environment variable name", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nenv = {LAZARET_SESSION_ID = \"a\"}\n", "profiles.claude.env.LAZARET_SESSION_ID", "reserved", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nenv = {A = \"env:B C\"}\n", "profiles.claude.env.A", "invalid host variable name", false)
}

func TestVolumeModes(t *testing.T) {
	for mode, want := range map[string]struct {
		ro   bool
		opts []string
	}{
		"": {false, nil}, "rw": {false, nil}, "ro": {true, nil}, "z": {false, []string{"z"}}, "Z": {false, []string{"Z"}},
		"ro,z": {true, []string{"z"}}, "Z,rw": {false, []string{"Z"}},
	} {
		ro, opts, err := parseMode(mode)
		if err != nil || ro != want.ro || !reflect.DeepEqual(opts, want.opts) {
			t.Errorf("parseMode(%q) = %v %v %v", mode, ro, opts, err)
		}
	}
	for _, bad := range []string{"ro,rw", "z,Z", "rx", "ro,", ",ro", "ro,ro", "RO", "ro z", "nosuid", "ro,z,Z"} {
		if _, _, err := parseMode(bad); err == nil {
			t.Errorf("parseMode(%q) accepted", bad)
		}
	}
	testEnv(t)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"/srv\", container = \"/c\", mode = \"ro,rw\"}]\n", "profiles.claude.volumes[0].mode", "both ro and rw", false)
}

func TestContainerPaths(t *testing.T) {
	for _, ok := range []string{"/root", "/workspace/sub", "/home/agent/.cache", "/opt/x"} {
		if err := checkContainerPath(ok); err != nil {
			t.Errorf("checkContainerPath(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/", "rel", "/a/", "/a//b", "/a/./b", "/a/../b", "/run/lazaret", "/run/lazaret/bin", "/workspace",
		"/proc/x", "/sys", "/dev/x", "/a,b", "/a:b", "/a\nb", "/a\x00b", "/{profile_dir}"} {
		if err := checkContainerPath(bad); err == nil {
			t.Errorf("checkContainerPath(%q) accepted", bad)
		}
	}
	testEnv(t)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"/srv\", container = \"/run/lazaret/tls\"}]\n", "profiles.claude.volumes[0].container", "/run/lazaret", true)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"/srv\", container = \"/workspace\"}]\n", "profiles.claude.volumes[0].container", "/workspace", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"/srv\", container = \"/a\"}, {host = \"/opt\", container = \"/a\"}]\n", "profiles.claude.volumes[1].container", "twice", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{container = \"/a\"}]\n", "profiles.claude.volumes[0].host", "missing", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"/srv,readonly=false\", container = \"/a\"}]\n", "profiles.claude.volumes[0].host", "mount options", true)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"srv\", container = \"/a\"}]\n", "profiles.claude.volumes[0].host", "absolute", false)
}

func TestPersistentDirs(t *testing.T) {
	testEnv(t)
	c := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\npersistent_dirs = [\"/usr\", \"/var\", \"/opt/tools\"]\n[profiles.bare]\nimage = \"x:1\"\npersistent_dirs = []\n[profiles.dflt]\nimage = \"x:1\"\n")
	if got := c.Profiles["claude"].PersistentDirs; !reflect.DeepEqual(got, []string{"/usr", "/var", "/opt/tools"}) {
		t.Errorf("claude = %v", got)
	}
	if got := c.Profiles["bare"].PersistentDirs; len(got) != 0 {
		t.Errorf("explicit [] = %v", got)
	}
	if got := c.Profiles["dflt"].PersistentDirs; !reflect.DeepEqual(got, DefaultPersistentDirs) {
		t.Errorf("absent = %v, want %v", got, DefaultPersistentDirs)
	}
	for _, bad := range []string{"/", "usr", "/usr/", "/usr/../etc", "/proc", "/sys/x", "/dev", "/run", "/run/x", "/tmp", "/tmp/x", "/workspace", "/workspace/x", "/a,b", "/a:b"} {
		if err := checkPersistentDir(bad); err == nil {
			t.Errorf("checkPersistentDir(%q) accepted", bad)
		}
	}
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\npersistent_dirs = [\"/usr\", \"/usr/local\"]\n", "profiles.claude.persistent_dirs[1]", "nested", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\npersistent_dirs = [\"/var/lib\", \"/var\"]\n", "profiles.claude.persistent_dirs[1]", "nested", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\npersistent_dirs = [\"/usr\", \"/usr\"]\n", "profiles.claude.persistent_dirs[1]", "overlap", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\npersistent_dirs = [\"/var/lib\", \"/var_lib\"]\n", "profiles.claude.persistent_dirs[1]", "overlay name", false)
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"/srv\", container = \"/usr\"}]\n", "profiles.claude.volumes[0].container", "persistent_dirs", false)
}

func TestGitMode(t *testing.T) {
	testEnv(t)
	for _, m := range []string{"branch", "direct"} {
		if c := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\ngit_mode = \""+m+"\"\n"); c.Profiles["claude"].GitMode != m {
			t.Errorf("git_mode %s not kept", m)
		}
	}
	if c := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\n"); c.Profiles["claude"].GitMode != "" {
		t.Error("absent git_mode is not empty")
	}
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\ngit_mode = \"Branch\"\n", "profiles.claude.git_mode", "want \"branch\" or \"direct\"", false)
}

func TestAutoApprove(t *testing.T) {
	testEnv(t)
	c := mustParse(t, "[escalation]\nauto_approve = [\"make lint\", \"cargo fmt --check\", \"npm 'run' \\\"test\\\"\", \"npm test {args}\"]\n")
	want := [][]string{{"make", "lint"}, {"cargo", "fmt", "--check"}, {"npm", "run", "test"}, {"npm", "test", "{args}"}}
	if !reflect.DeepEqual(c.Escalation.AutoApprove, want) {
		t.Errorf("AutoApprove = %q", c.Escalation.AutoApprove)
	}
	for entry, msg := range map[string]string{
		"git status":          "git runs hooks",
		"bash -c x":           "shell or interpreter",
		"/usr/bin/python3 x":  "shell or interpreter",
		"env make":            "env runs any command",
		"sudo make":           "sudo",
		"xargs make":          "xargs",
		"make lint; rm -rf /": "metacharacters",
		"make $(id)":          "metacharacters",
		"make > out":          "metacharacters",
		"FOO=1 make":          "not a single simple command",
		"":                    "not a single simple command",
		"make lint\nrm":       "metacharacters",
		// The placeholder syntax.
		"make {args} lint":    "must be the last word",
		"make {arg}":          "unknown placeholder",
		"make lint {args...}": "unknown placeholder",
		"make {args":          "unknown placeholder",
		"{args}":              "needs a command",
		// Tools and subcommands that run what their arguments say.
		"npm exec foo {args}": "npm exec downloads and runs",
		"npm x foo":           "npm x downloads",
		"go run .":            "go run builds and runs",
		"pnpm dlx x":          "pnpm dlx",
		"find . -name x":      "find -exec",
		"awk 1":               "system()",
		"sed -n p":            "e command",
		"busybox make":        "busybox",
		"timeout 10 make":     "timeout runs",
		"ssh host":            "ssh runs",
		"tar cf x.tar .":      "--to-command",
		"zip -r x.zip .":      "-TT",
		"less README":         "less can start a shell",
		"git-upload-pack .":   "interpreter",
		"docker ps":           "containers",
		"lazaret status":      "lazaret controls",
		"dpkg -l":             "installs packages",
		"npx jest":            "npx downloads",
		"zsh -c x":            "shell",
		"tee out":             "writes any file",
		"curl https://x":      "-K",
	} {
		doc := "[escalation]\nauto_approve = [" + quoteValue(entry) + "]\n"
		wantErr(t, doc, "escalation.auto_approve[0]", msg, strings.Contains(entry, "\x00"))
	}
}

// TestAutoApproveRunnerWarnings: entries whose program runs what files in
// the workspace say are accepted with a warning naming file, line and key;
// read-only tools are not.
func TestAutoApproveRunnerWarnings(t *testing.T) {
	testEnv(t)
	c := mustParse(t, "[escalation]\nauto_approve = [\n\"make lint\",\n\"shellcheck x.sh\",\n\"npm test {args}\",\n\"go fmt ./...\",\n\"go test ./...\",\n\"./scripts/lint\",\n]\n")
	want := []string{
		`test.toml:3: escalation.auto_approve[0]: "make lint" runs what the workspace's Makefile says; in direct mode the agent edits it`,
		`test.toml:5: escalation.auto_approve[2]: "npm test {args}" runs what the workspace's package.json (scripts) says; in direct mode the agent edits it`,
		`test.toml:7: escalation.auto_approve[4]: "go test ./..." runs what the workspace's go.mod, //go:generate lines, cgo and test code says; in direct mode the agent edits it`,
		`test.toml:8: escalation.auto_approve[5]: "./scripts/lint" runs what the workspace's script ./scripts/lint says; in direct mode the agent edits it`,
	}
	if !reflect.DeepEqual(c.Escalation.RunnerWarnings, want) {
		t.Errorf("RunnerWarnings:\n%s\nwant\n%s", strings.Join(c.Escalation.RunnerWarnings, "\n"), strings.Join(want, "\n"))
	}
	if len(c.Warnings) != 0 {
		t.Errorf("runner warnings also printed by every command: %q", c.Warnings)
	}
}

func TestImages(t *testing.T) {
	testEnv(t)
	for _, img := range []string{"node:22", "docker.io/library/node:22-bookworm", "localhost/lazaret-default", "localhost/x:latest",
		"ghcr.io/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "registry:5000/a/b:1.2", "node:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"} {
		c := mustParse(t, "[profiles.claude]\nimage = \""+img+"\"\n")
		if len(c.Warnings) != 0 {
			t.Errorf("image %s: warnings %v", img, c.Warnings)
		}
	}
	for _, img := range []string{"node", "node:latest", "docker.io/library/node:latest"} {
		c := mustParse(t, "[profiles.claude]\nimage = \""+img+"\"\n")
		if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "not pinned") || !strings.HasPrefix(c.Warnings[0], "test.toml:2: profiles.claude.image: ") {
			t.Errorf("image %s: warnings %v", img, c.Warnings)
		}
	}
	for _, img := range []string{"--privileged", "-v/:/h", "Node:1", "a b", "node:", "@sha256:00", "node@sha256:xyz", ""} {
		wantErr(t, "[profiles.claude]\nimage = \""+img+"\"\n", "profiles.claude.image", "invalid image reference", false)
	}
	wantErr(t, "[profiles.claude]\npersistent_dirs = [\"/usr\"]\n", "profiles.claude.image", "needs an image", false)
	// [profiles.default] replaces the built-in profile; its image may be omitted.
	c := mustParse(t, "[profiles.default]\npersistent_dirs = [\"/usr\", \"/var\"]\n")
	if p := c.Profiles["default"]; p.Image != DefaultImage || len(p.PersistentDirs) != 2 {
		t.Errorf("default override = %+v", p)
	}
}

func TestDataRootAndSocketDir(t *testing.T) {
	root := testEnv(t)
	c := mustParse(t, "data_root = \"~/lz\"\n[escalation]\nsocket_dir = \"~/sock/\"\nenabled = false\n")
	if c.DataRoot != root+"/home/lz" || c.Escalation.SocketDir != root+"/home/sock" || c.Escalation.Enabled {
		t.Errorf("got %q %q %v", c.DataRoot, c.Escalation.SocketDir, c.Escalation.Enabled)
	}
	wantErr(t, "data_root = \"/\"\n", "data_root", "host root", true)
	wantErr(t, "data_root = \"/proc/self\"\n", "data_root", "/proc", true)
	wantErr(t, "data_root = \"{profile_dir}/x\"\n", "data_root", "tokens are not allowed", false)
	wantErr(t, "data_root = \"/srv/{profile_name}\"\n", "data_root", "tokens are not allowed", false)
	wantErr(t, "data_root = \"rel\"\n", "data_root", "absolute", false)
	wantErr(t, "[escalation]\nsocket_dir = \"/dev/shm/x\"\n", "escalation.socket_dir", "/dev", true)
	wantErr(t, "[escalation]\nsocket_dir = \"/x/{domain_hash}\"\n", "escalation.socket_dir", "tokens are not allowed", false)
	// "some/~" is a literal path element, not a home reference.
	c = mustParse(t, "data_root = \""+root+"/some/~\"\n")
	if c.DataRoot != root+"/some/~" {
		t.Errorf("data_root some/~ = %q", c.DataRoot)
	}
}

// TestAllErrorsInOnePass: an unknown key, a type error, a bad CIDR and a
// bad profile name in one file are all reported, in line order (go-toml
// alone stops at the first unknown key or type error).
func TestAllErrorsInOnePass(t *testing.T) {
	testEnv(t)
	doc := `data_rot = "/tmp/x"
[network]
allow_egress = ["10.0.0.0/33", "10.0.0.0/8"]
[profiles."bad name"]
image = "x:1"
[profiles.claude]
image = "y:1"
git_mode = 5
allow_egres = ["1.2.3.4/32"]
env = { A = "x", B = 2 }
volumes = [{ host = "~/src", container = "/c", mode = "rw", hots = "x" }]
[profiles.other]
image = "z:1"
allow_domains = ["bad domain"]
`
	_, err := parse(t, doc)
	var got []string
	for _, e := range Errors(err) {
		got = append(got, fmt.Sprintf("%d %s", e.Line, e.Key))
	}
	want := []string{
		"1 data_rot", "3 network.allow_egress[0]", `4 profiles."bad name"`, "8 profiles.claude.git_mode",
		"9 profiles.claude.allow_egres", "10 profiles.claude.env.B", "11 profiles.claude.volumes[0].hots",
		"14 profiles.other.allow_domains[0]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s\n(%v)", strings.Join(got, "\n"), strings.Join(want, "\n"), err)
	}
}

func TestDecodeErrors(t *testing.T) {
	testEnv(t)
	for _, c := range []struct{ doc, key, msg string }{
		{"data_root = 5\n", "data_root", "wrong type: got integer, want a string"},
		{"[escalation]\nenabled = \"yes\"\n", "escalation.enabled", "want a boolean"},
		{"[profiles.claude]\nimage = \"x:1\"\nbogus = 1\n", "profiles.claude.bogus", "unknown key"},
		{"[profiles.claude]\nimage = \"x:1\"\nvolumes = [{host = \"/a\", hst = \"/b\"}]\n", "profiles.claude.volumes[0].hst", "unknown key; did you mean host?"},
		{"[network]\nallow_egress = \"10.0.0.0/8\"\n", "network.allow_egress", "want an array of strings"},
		{"[profiles.claude]\nimage = \"x:1\"\nenv = {A = 1}\n", "profiles.claude.env.A", "wrong type: got integer, want a string"},
		{"[profiles.claude]\nimage = \"x:1\"\nenv = 1\n", "profiles.claude.env", "want a table of strings"},
		{"[network]\nallow_egress = [\"10.0.0.0/8\", 5]\n", "network.allow_egress[1]", "wrong type: got integer, want a string"},
		{"[profiles.claude]\nimage = \"x:1\"\nvolumes = [1]\n", "profiles.claude.volumes[0]", "wrong type: got integer, want a table {host, container, mode}"},
		{"[profil.claude]\nimage = \"x:1\"\n", "profil", "unknown key; did you mean profiles?"},
		{"data_root = \"/a\"\ndata_root = \"/b\"\n", "data_root", "already defined"},
		{"unknown_top = 1\n", "unknown_top", "unknown key"},
	} {
		_, err := parse(t, c.doc)
		errs := Errors(err)
		if len(errs) == 0 {
			t.Errorf("%q: err %v", c.doc, err)
			continue
		}
		e := errs[0]
		s := e.Error()
		if e.Key != c.key || !strings.Contains(s, c.msg) || strings.Contains(s, "\n") || e.Line == 0 || strings.Contains(s, "struct") || strings.Contains(s, "config.") {
			t.Errorf("%q: got %q (key %q line %d), want key %q and %q", c.doc, s, e.Key, e.Line, c.key, c.msg)
		}
	}
	// A syntax error: one line with file and line.
	_, err := parse(t, "[network\n")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "test.toml:1: ") {
		t.Errorf("syntax error = %q", err)
	}
}

func TestSeveralErrorsAllReported(t *testing.T) {
	testEnv(t)
	_, err := parse(t, "[network]\nallow_egress = [\"10.0.0.0/33\"]\n[profiles.\"a.b\"]\nimage = \"x:1\"\n[escalation]\nauto_approve = [\"git status\"]\n")
	errs := Errors(err)
	if len(errs) != 3 || errs[0].Line != 2 || errs[1].Line != 3 || errs[2].Line != 6 {
		t.Fatalf("errors = %v", errs)
	}
	if s := err.Error(); strings.Contains(s, "\n") || !strings.Contains(s, "and 2 more") {
		t.Errorf("ErrorList.Error() = %q", s)
	}
}

func TestStarterPasses(t *testing.T) {
	testEnv(t)
	c, err := Parse("starter.toml", Starter)
	if err != nil {
		t.Fatalf("starter config fails: %v", err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("starter warnings: %v", c.Warnings)
	}
	// Its example profile, once uncommented, is valid too.
	var b strings.Builder
	in := false
	for _, line := range strings.Split(string(Starter), "\n") {
		if strings.HasPrefix(line, "# [profiles.claude]") {
			in = true
		}
		if in {
			line = strings.TrimPrefix(line, "# ")
		}
		b.WriteString(line + "\n")
	}
	t.Setenv("ANTHROPIC_API_KEY", "k")
	c, err = Parse("starter.toml", []byte(b.String()))
	if err != nil {
		t.Fatalf("uncommented starter fails: %v\n%s", err, b.String())
	}
	if p := c.Profiles["claude"]; p == nil || len(p.Secrets) != 1 || p.Secrets[0].EnvVar != "ANTHROPIC_API_KEY" || len(p.Volumes) != 1 || p.CheckEnv() != nil {
		t.Errorf("example profile = %+v", p)
	}
}

// TestCheckWorkspace: each refused directory with the reason named, and
// the positive controls next to them (a project directory beside or
// inside the same places) accepted.
func TestCheckWorkspace(t *testing.T) {
	root := testEnv(t)
	home := root + "/home"
	for _, d := range []string{".ssh/keys", ".gnupg", ".config/lazaret", ".config/nvim", ".local/share", ".local/bin", ".cache", "proj", "src/a", "other/.ssh"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(root, "proj-with-config", "lazaret.toml")
	os.MkdirAll(filepath.Dir(cfgFile), 0o700)
	os.WriteFile(cfgFile, nil, 0o600)
	c := mustParse(t, "")
	inUse, err := Parse(cfgFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c        *Config
		ws, want string
	}{
		{c, "/", "is the host root /"},
		{c, "/proc", "system directory /proc"},
		{c, "/etc/ssh", "system directory /etc"},
		{c, "/usr", "system directory /usr"},
		{c, "/var/tmp", "shared directory"},
		{c, "/home", "shared directory"},
		{c, "/var", "shared directory"},
		{c, root, "contains your home directory"},
		{c, home, "is your home directory"},
		{c, home + "/.ssh", "credential directory"},
		{c, home + "/.ssh/keys", "credential directory"},
		{c, home + "/.gnupg", "credential directory"},
		{c, home + "/.local/bin", "credential directory"},
		{c, home + "/.local", "contains or is inside a credential directory"},
		{c, home + "/.local/share", "is or contains"},
		{c, home + "/.cache", "is or contains"},
		{c, root + "/cfg", "lazaret's configuration directory"},
		{c, root + "/cfg/lazaret", "lazaret's configuration directory"},
		{c, home + "/.config", "is or contains " + home + "/.config"},
		{c, root + "/data", "data_root"},
		{c, root + "/data/lazaret", "data_root"},
		{c, root + "/data/lazaret/domains/x/workspace", "data_root"},
		{c, root + "/run", "runtime directory"},
		{c, root + "/run/lazaret", "runtime directory"},
		{inUse, root + "/proj-with-config", "configuration file " + cfgFile},
		{c, "/a,b", "mount options"},
	} {
		err := tc.c.CheckWorkspace(tc.ws)
		if !IsSecurity(err) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckWorkspace(%q) = %v, want a security error with %q", tc.ws, err, tc.want)
		}
	}
	for _, ws := range []string{home + "/proj", home + "/src/a", home + "/src", "/srv/proj", "/tmp/proj", home + "/.config/nvim", home + "/other"} {
		if err := c.CheckWorkspace(ws); err != nil {
			t.Errorf("CheckWorkspace(%q) = %v, want it accepted", ws, err)
		}
	}
}

func TestProfileLookup(t *testing.T) {
	testEnv(t)
	c := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\n")
	if _, err := c.Profile("claude"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Profile("codex")
	if err == nil || !strings.Contains(err.Error(), "claude, default") {
		t.Errorf("unknown profile error = %v", err)
	}
	if _, err := c.Profile("../x"); err == nil {
		t.Error("invalid name accepted")
	}
}

func TestLinesOfOtherTOMLForms(t *testing.T) {
	testEnv(t)
	// Dotted keys define the profile table: a missing image is reported on
	// the line that introduces it.
	e := wantErr(t, "\n\nprofiles.claude.persistent_dirs = [\"/usr\"]\n", "profiles.claude.image", "needs an image", false)
	if e.Line != 3 {
		t.Errorf("dotted keys: line %d, want 3", e.Line)
	}
	// Arrays of tables count their elements.
	doc := "[profiles.claude]\nimage = \"x:1\"\n[[profiles.claude.volumes]]\nhost = \"/srv\"\ncontainer = \"/a\"\n[[profiles.claude.volumes]]\nhost = \"/srv\"\ncontainer = \"/b\"\nmode = \"rx\"\n"
	if e := wantErr(t, doc, "profiles.claude.volumes[1].mode", "invalid mode", false); e.Line != 9 {
		t.Errorf("array of tables: line %d, want 9", e.Line)
	}
	// Inline tables.
	doc = "profiles = { claude = { image = \"x:1\",\n allow_egress = [\"1.2.3.4/40\"] } }\n"
	if e := wantErr(t, doc, "profiles.claude.allow_egress[0]", "invalid CIDR", false); e.Line != 2 {
		t.Errorf("inline tables: line %d, want 2", e.Line)
	}
}

func TestErrorIsOneLineWhateverItHolds(t *testing.T) {
	e := &Error{File: "a\nb.toml", Line: 3, Key: "k\r", Msg: "x\ny\u2028z"}
	if s := e.Error(); strings.ContainsFunc(s, isControl) || s != `a\nb.toml:3: k\r: x\ny\u2028z` {
		t.Errorf("Error() = %q", s)
	}
}

func TestWithChanges(t *testing.T) {
	if c := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\nwith_changes = true\n"); !c.Profiles["claude"].WithChanges {
		t.Error("with_changes = true not kept")
	}
	if c := mustParse(t, "[profiles.claude]\nimage = \"x:1\"\n"); c.Profiles["claude"].WithChanges {
		t.Error("absent with_changes is true")
	}
	wantErr(t, "[profiles.claude]\nimage = \"x:1\"\nwith_changes = \"yes\"\n", "profiles.claude.with_changes", "a boolean", false)
}
