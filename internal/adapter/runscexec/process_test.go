package runscexec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var testID = strings.Repeat("a", 64)

// stateDir is a runsc root holding testdata/running.state for testID.
func stateDir(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("testdata/running.state")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, testID+"_sandbox:"+testID+".state"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

func load(t *testing.T) *Container {
	t.Helper()
	c, err := Load(stateDir(t), testID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func decode(t *testing.T, c *Container, o Options) process {
	t.Helper()
	b, err := c.Process(o)
	if err != nil {
		t.Fatal(err)
	}
	var p process
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadRefusesWhatItCannotUse(t *testing.T) {
	root := stateDir(t)
	if _, err := Load(root, "../"+testID[3:]); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a path-like ID: %v, want ErrUnsupported", err)
	}
	if _, err := Load(root, strings.Repeat("b", 64)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("no state file: %v, want ErrUnsupported", err)
	}
	base := func() *state {
		c := load(t)
		p := c.base
		st := &state{ID: testID, Status: "running"}
		st.Spec = &struct {
			Process *process `json:"process"`
		}{Process: &p}
		return st
	}
	if _, err := fromState(root, testID, base()); err != nil {
		t.Fatalf("control: a running container with capabilities and HOME: %v", err)
	}
	for name, mutate := range map[string]func(*state){
		"another container": func(s *state) { s.ID = strings.Repeat("c", 64) },
		"stopped":           func(s *state) { s.Status = "stopped" },
		"no spec":           func(s *state) { s.Spec = nil },
		"no capabilities":   func(s *state) { s.Spec.Process.Capabilities = nil },
		"no HOME":           func(s *state) { s.Spec.Process.Env = []string{"PATH=/bin"} },
	} {
		st := base()
		mutate(st)
		if _, err := fromState(root, testID, st); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
}

// The process is podman exec's for the container's user: root gets the
// bounding set as effective and permitted, nothing inheritable.
func TestProcessRoot(t *testing.T) {
	c := load(t)
	p := decode(t, c, Options{Command: []string{"true"}, TTY: true})
	if p.User.UID != 0 || p.User.GID != 0 || !p.NoNewPrivileges || !p.Terminal || p.Cwd != "/workspace" {
		t.Errorf("process = %+v", p)
	}
	want := []string{"CAP_CHOWN", "CAP_KILL"}
	caps := p.Capabilities
	if !slices.Equal(caps.Bounding, want) || !slices.Equal(caps.Effective, want) || !slices.Equal(caps.Permitted, want) ||
		len(caps.Inheritable) != 0 || len(caps.Ambient) != 0 {
		t.Errorf("capabilities = %+v", caps)
	}
	if !slices.Equal(p.Args, []string{"true"}) {
		t.Errorf("args = %q", p.Args)
	}
}

func TestProcessNonRootGetsTheContainersEffectiveSet(t *testing.T) {
	c := load(t)
	c.base.User = user{UID: 1000, GID: 1000, AdditionalGids: []uint32{27}}
	c.base.Capabilities = &capabilities{Bounding: []string{"CAP_CHOWN", "CAP_KILL"}, Effective: []string{}}
	p := decode(t, c, Options{Command: []string{"id"}})
	if p.User.UID != 1000 || !slices.Equal(p.User.AdditionalGids, []uint32{27}) {
		t.Errorf("user = %+v", p.User)
	}
	caps := p.Capabilities
	if len(caps.Effective)+len(caps.Permitted)+len(caps.Inheritable)+len(caps.Ambient) != 0 || len(caps.Bounding) != 2 {
		t.Errorf("capabilities = %+v, want only the bounding set", caps)
	}
	if p.Terminal {
		t.Error("terminal without TTY")
	}
}

func TestProcessEnvironmentAndWorkdir(t *testing.T) {
	c := load(t)
	p := decode(t, c, Options{Command: []string{"env"}, Workdir: "/tmp",
		Env: map[string]string{"LANG": "xx", "ZZ": "1", "AA": "a=b"}})
	want := []string{"PATH=/usr/bin:/bin", "LANG=xx", "HOME=/root", "container=podman", "AA=a=b", "ZZ=1"}
	if !slices.Equal(p.Env, want) {
		t.Errorf("env = %q, want %q", p.Env, want)
	}
	if p.Cwd != "/tmp" {
		t.Errorf("cwd = %q", p.Cwd)
	}
	if _, err := c.Process(Options{Command: []string{"x"}, Workdir: "rel"}); err == nil {
		t.Error("a relative working directory was accepted")
	}
	if _, err := c.Process(Options{}); err == nil {
		t.Error("an empty command was accepted")
	}
}

func TestMergeEnvKeepsOneEntryPerName(t *testing.T) {
	got := mergeEnv([]string{"A=1", "B=2", "A=3"}, map[string]string{"A": "x"})
	if !slices.Equal(got, []string{"A=x", "B=2"}) {
		t.Errorf("mergeEnv = %q", got)
	}
}

func TestDefaultRoot(t *testing.T) {
	if got := DefaultRoot("/run/user/7"); got != "/run/user/7/runsc" {
		t.Errorf("DefaultRoot = %q", got)
	}
	if got := DefaultRoot(""); !strings.HasSuffix(got, "/runsc") || !strings.HasPrefix(got, "/run/user/") {
		t.Errorf("DefaultRoot(\"\") = %q", got)
	}
}
