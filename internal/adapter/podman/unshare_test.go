package podman

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A pid file that names no catatonit of ours in another user namespace is
// never joined: Unshare then runs podman unshare.
func TestPauseProcessRefusesWhatIsNotPodmansPause(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("rootful: no pause process is ever used")
	}
	for name, content := range map[string]string{
		"our own pid (not catatonit, our namespace)": strconv.Itoa(os.Getpid()),
		"a pid that does not exist":                  "2147483646",
		"garbage":                                    "12ab",
		"pid 1":                                      "1",
	} {
		t.Run(name, func(t *testing.T) {
			rt := t.TempDir()
			if err := os.MkdirAll(filepath.Join(rt, "libpod", "tmp"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(rt, "libpod", "tmp", "pause.pid"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			c := &Client{Env: []string{"XDG_RUNTIME_DIR=" + rt}}
			if pid, ok := c.PauseProcess(); ok {
				t.Errorf("PauseProcess = %d, true; want refused", pid)
			}
		})
	}
	c := &Client{Env: []string{"XDG_RUNTIME_DIR=" + t.TempDir()}}
	if _, ok := c.PauseProcess(); ok {
		t.Error("PauseProcess without a pid file = true")
	}
}

func TestSingleLayerDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		gd   GraphDriver
		want string
	}{
		{"single overlay layer", GraphDriver{Name: "overlay", Data: map[string]string{"UpperDir": "/s/overlay/abc/diff"}}, "/s/overlay/abc/diff"},
		{"several layers", GraphDriver{Name: "overlay", Data: map[string]string{"UpperDir": "/s/a/diff", "LowerDir": "/s/b/diff"}}, ""},
		{"another driver", GraphDriver{Name: "vfs", Data: map[string]string{"UpperDir": "/s/a"}}, ""},
		{"relative", GraphDriver{Name: "overlay", Data: map[string]string{"UpperDir": "s/a/diff"}}, ""},
		{"no upper dir", GraphDriver{Name: "overlay"}, ""},
		{"newline", GraphDriver{Name: "overlay", Data: map[string]string{"UpperDir": "/s/a\n/diff"}}, ""},
	} {
		got, ok := (&ImageInfo{GraphDriver: tc.gd}).SingleLayerDir()
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: SingleLayerDir = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

func TestDecodeImageInspectGraphDriver(t *testing.T) {
	// Recorded from podman 4.3.1: `podman image inspect --format json localhost/lazaret-default`.
	out := []byte(`[{"Id":"f21ce573de22","Digest":"sha256:1","GraphDriver":{"Name":"overlay","Data":{"MergedDir":"/home/u/.local/share/containers/storage/overlay/d637/merged","UpperDir":"/home/u/.local/share/containers/storage/overlay/d637/diff","WorkDir":"/home/u/.local/share/containers/storage/overlay/d637/work"}}}]`)
	info, err := decodeImageInspect(out, "x")
	if err != nil {
		t.Fatal(err)
	}
	if dir, ok := info.SingleLayerDir(); !ok || dir != "/home/u/.local/share/containers/storage/overlay/d637/diff" {
		t.Errorf("SingleLayerDir = %q, %v", dir, ok)
	}
}

// Positive control for the refusals above: the real pause process of this
// user's rootless podman, when one runs, is accepted.
func TestPauseProcessAcceptsPodmansPause(t *testing.T) {
	rt := os.Getenv("XDG_RUNTIME_DIR")
	b, err := os.ReadFile(filepath.Join(rt, "libpod", "tmp", "pause.pid"))
	if os.Getuid() == 0 || rt == "" || err != nil {
		t.Skip("no rootless podman pause process here")
	}
	pid, _ := strconv.Atoi(string(b))
	if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err != nil || string(comm) != "catatonit\n" {
		t.Skip("the pause pid file is stale")
	}
	if got, ok := (&Client{}).PauseProcess(); !ok || got != pid {
		t.Errorf("PauseProcess = %d, %v; want %d", got, ok, pid)
	}
}
