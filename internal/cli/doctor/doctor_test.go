package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/version"
)

func TestSubIDCount(t *testing.T) {
	f := filepath.Join(t.TempDir(), "subuid")
	os.WriteFile(f, []byte("alice:100000:65536\nbob:165536:65536\n1003:231072:1000\nalice:300000:10\nbroken line\n"), 0o644)
	for _, tc := range []struct {
		name, uid string
		want      int
	}{
		{"alice", "1001", 65546},
		{"bob", "1002", 65536},
		{"carol", "1003", 1000},
		{"dave", "1004", 0},
	} {
		got, err := subIDCount(f, tc.name, tc.uid)
		if err != nil || got != tc.want {
			t.Errorf("subIDCount(%s) = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if _, err := subIDCount(filepath.Join(t.TempDir(), "missing"), "a", "1"); err == nil {
		t.Error("missing file gave no error")
	}
}

func TestCheckDevice(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "rw")
	os.WriteFile(ok, nil, 0o666)
	if r := checkDevice(ok, "test"); !r.OK {
		t.Errorf("writable file failed: %+v", r)
	}
	if os.Geteuid() == 0 {
		return // root opens anything; the failing half needs a normal user
	}
	ro := filepath.Join(dir, "ro")
	os.WriteFile(ro, nil, 0o400)
	r := checkDevice(ro, "test")
	if r.OK || r.Fix != "sudo chmod 666 "+ro {
		t.Errorf("read-only file: %+v", r)
	}
}

func TestIsStatic(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary is built with cgo on this machine (the race detector
	// and net need it) only sometimes; /bin/sh is always dynamic on Debian.
	if static, err := isStatic("/bin/sh"); err != nil || static {
		t.Errorf("/bin/sh: static=%v err=%v", static, err)
	}
	if _, err := isStatic(exe); err != nil {
		t.Errorf("test binary: %v", err)
	}
	if _, err := isStatic("/etc/passwd"); err == nil {
		t.Error("a text file parsed as ELF")
	}
}

func TestCheckHugePages(t *testing.T) {
	for _, tc := range []struct {
		shmem, defrag string
		on            bool
		fix           string
	}{
		{"always within_size advise [never] deny force", "always defer defer+madvise [madvise] never", false, "echo advise | sudo tee DIR/shmem_enabled; echo never | sudo tee DIR/defrag"},
		{"always within_size [advise] never deny force", "always defer [defer+madvise] madvise never", false, "echo advise | sudo tee DIR/shmem_enabled; echo defer | sudo tee DIR/defrag"},
		{"always within_size advise [never] deny force", "always defer defer+madvise madvise [never]", false, "echo advise | sudo tee DIR/shmem_enabled"},
		{"always within_size [advise] never deny force", "always defer defer+madvise madvise [never]", true, ""},
		{"always within_size [advise] never deny force", "[always] defer defer+madvise madvise never", true, ""},
		{"always [within_size] advise never deny force", "always defer defer+madvise [madvise] never", true, ""},
		{"always within_size advise never [deny] force", "always defer defer+madvise madvise [never]", false, "lazaret leaves it"},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "shmem_enabled"), []byte(tc.shmem+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "defrag"), []byte(tc.defrag+"\n"), 0o644)
		r := checkHugePages(dir)
		if r.OK != tc.on {
			t.Errorf("%q / %q: OK=%v, want %v (%+v)", tc.shmem, tc.defrag, r.OK, tc.on, r)
		}
		if !tc.on && (!r.Warning || !strings.Contains(r.Fix, strings.ReplaceAll(tc.fix, "DIR", dir))) {
			t.Errorf("%q / %q: fix %q, want it to contain %q", tc.shmem, tc.defrag, r.Fix, tc.fix)
		}
	}
	if r := checkHugePages(filepath.Join(t.TempDir(), "none")); !r.OK {
		t.Errorf("a kernel without THP: %+v", r)
	}
}

func TestRunscStampResult(t *testing.T) {
	if _, ok := runscStampResult("/x/runsc", version.RunscStamp); !ok {
		t.Error("the current build's stamp was refused")
	}
	for stamp, want := range map[string]string{
		version.RunscVersion: "without its seccomp filters precompiled",
		"v0.0.0-old":         `version "v0.0.0-old"`,
		"":                   `version ""`,
	} {
		r, ok := runscStampResult("/x/runsc", stamp)
		if ok || r.OK || !r.Warning || !strings.Contains(r.Detail, want) || r.Fix == "" {
			t.Errorf("stamp %q: %+v, want a warning naming %q with a fix", stamp, r, want)
		}
	}
}

// TestCheckStateModes: the doctor fails, with the start's fix, when other
// users can reach an overlay root under the data root (a domain's here),
// and passes once the fix is applied.
func TestCheckStateModes(t *testing.T) {
	base := t.TempDir()
	for _, p := range []string{filepath.Dir(base), base} {
		os.Chmod(p, 0o755)
	}
	data := filepath.Join(base, "data")
	if r := checkStateModes(data); !r.OK {
		t.Errorf("fresh data root: %+v", r)
	}
	prof, dom := filepath.Join(data, "claude", "overlay"), filepath.Join(data, "domains", "abc", "overlay")
	for _, d := range []string{prof, dom} {
		os.MkdirAll(d, 0o700)
	}
	os.Chmod(prof, 0)
	for _, d := range []string{data, filepath.Join(data, "domains"), filepath.Dir(dom), dom} {
		os.Chmod(d, 0o755)
	}
	r := checkStateModes(data)
	if r.OK || !strings.Contains(r.Detail, dom+" (mode 0755)") || !strings.HasSuffix(r.Fix, "chmod 000 "+dom) {
		t.Fatalf("open domain overlay root: %+v", r)
	}
	if out, err := exec.Command("sh", "-c", r.Fix).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", r.Fix, err, out)
	}
	if r := checkStateModes(data); !r.OK || !strings.Contains(r.Detail, "each of 2 ") {
		t.Errorf("after the fix: %+v", r)
	}
}
