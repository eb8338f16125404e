package podman

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/execx"
)

// The testdata files are real outputs of podman 4.3.1 (rootless, runsc
// through lazaret-runsc) captured on the development machine.

func TestDecodeContainerInspect(t *testing.T) {
	out, err := os.ReadFile("testdata/container_inspect.json")
	if err != nil {
		t.Fatal(err)
	}
	info, err := decodeContainerInspect(out, "lazaret-lc-capture")
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "lazaret-lc-capture" || len(info.ID) != 64 {
		t.Errorf("name/id: %q %q", info.Name, info.ID)
	}
	if !info.State.Running || info.State.Status != "running" || info.State.Pid == 0 || info.State.ConmonPid == 0 {
		t.Errorf("state: %+v", info.State)
	}
	if info.State.StartedAt.IsZero() {
		t.Error("StartedAt not decoded")
	}
	if info.Config.Labels["lazaret.domain"] != "abcdef012345" {
		t.Errorf("labels: %v", info.Config.Labels)
	}
	if info.OCIRuntime != "/tmp/lc/bin/lazaret-runsc" {
		t.Errorf("runtime: %q", info.OCIRuntime)
	}
	if info.ImageDigest == "" || info.ImageName != "localhost/lazaret-default:latest" {
		t.Errorf("image: %q %q", info.ImageName, info.ImageDigest)
	}
}

func TestDecodeContainerInspectEmpty(t *testing.T) {
	// podman prints [] (and exits 125) for a missing container.
	_, err := decodeContainerInspect([]byte("[]\n"), "x")
	if !errors.Is(err, ErrNoSuchContainer) {
		t.Fatalf("err = %v", err)
	}
	if _, err := decodeContainerInspect([]byte("{"), "x"); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func TestNoSuchContainerError(t *testing.T) {
	e := &Error{execx.Failure{Args: []string{"container", "inspect"}, ExitCode: 125, Stderr: "Error: inspecting object: no such container nonexist\n"}}
	if !errors.Is(e, ErrNoSuchContainer) || !errors.Is(e, ErrPodman) {
		t.Fatalf("%v does not unwrap", e)
	}
}

func TestDecodePS(t *testing.T) {
	out, err := os.ReadFile("testdata/ps_label.json")
	if err != nil {
		t.Fatal(err)
	}
	list, err := decodePS(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("%d entries", len(list))
	}
	c := list[0]
	if c.Name() != "lazaret-lc-capture" || c.State != "running" || c.Labels["lazaret.profile"] != "default" || c.Pid == 0 {
		t.Errorf("entry: %+v", c)
	}
	empty, err := os.ReadFile("testdata/ps_empty.json")
	if err != nil {
		t.Fatal(err)
	}
	if list, err := decodePS(empty); err != nil || len(list) != 0 {
		t.Errorf("empty: %v %v", list, err)
	}
}

func TestExecArgs(t *testing.T) {
	got, err := ExecArgs(ExecOptions{
		Container: "c", Interactive: true, TTY: true,
		Env:     map[string]string{"B": "2", "A": "x y"},
		Workdir: "/workspace", Command: []string{"sh", "-c", "--help"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"exec", "-i", "-t", "--workdir", "/workspace", "c", "sh", "-c", "--help"}
	if !slices.Equal(got.Args, want) || got.Env["A"] != "x y" || got.Env["B"] != "2" {
		t.Fatalf("got %q %v\nwant %q", got.Args, got.Env, want)
	}
	if _, err := ExecArgs(ExecOptions{Container: "c"}); err == nil {
		t.Error("empty command accepted")
	}
	for _, env := range []map[string]string{{"A=B": "1"}, {"": "1"}, {"1A": "x"}, {"A*": "x"}, {" A": "x"}, {"A": "two\nlines"}, {"A": "cr\r"}, {"A": "nul\x00"}} {
		if _, err := ExecArgs(ExecOptions{Container: "c", Command: []string{"x"}, Env: env}); err == nil {
			t.Errorf("env %q accepted", env)
		}
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0", time.Second: "1", 1500 * time.Millisecond: "2", -time.Second: "0"} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestDecodeInfo(t *testing.T) {
	out, err := os.ReadFile("testdata/info.json")
	if err != nil {
		t.Fatal(err)
	}
	info, err := decodeInfo(out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Version.Version == "" || info.Store.GraphDriverName != "overlay" || !info.Host.Security.Rootless {
		t.Errorf("info: %+v", info)
	}
	if _, err := decodeInfo([]byte("{")); !errors.Is(err, ErrBadOutput) {
		t.Errorf("bad JSON: %v", err)
	}
}

func TestArgvOfVerbs(t *testing.T) {
	inv, err := ExecArgs(ExecOptions{Container: "c", Detach: true, Command: []string{"-x", "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"exec", "-d", "c", "-x", "y"}; !slices.Equal(inv.Args, want) {
		t.Errorf("exec -d: %q, want %q", inv.Args, want)
	}
	got := buildArgs(BuildOptions{ContextDir: "/ctx", Containerfile: "/ctx/C", Tag: "t:1", NoLayers: true})
	if want := []string{"build", "--network", "none", "--pull=never", "--layers=false", "--tag", "t:1", "--file", "/ctx/C", "/ctx"}; !slices.Equal(got, want) {
		t.Errorf("build: %q, want %q", got, want)
	}
}

func TestUserNamespaceLostError(t *testing.T) {
	// Podman 4.3's words (recorded on this project's machines) when the pause
	// process and every conmon were killed.
	stderr := `time="2026-12-06T18:59:05Z" level=error msg="invalid internal status, try resetting the pause process with \"podman system migrate\": could not find any running process: no such process"` + "\n"
	e := &Error{execx.Failure{Args: []string{"info"}, ExitCode: 125, Stderr: stderr}}
	if !errors.Is(e, ErrUserNamespaceLost) {
		t.Fatalf("%v does not unwrap to ErrUserNamespaceLost", e)
	}
	other := &Error{execx.Failure{Args: []string{"info"}, ExitCode: 125, Stderr: "Error: something else\n"}}
	if errors.Is(other, ErrUserNamespaceLost) {
		t.Fatal("an unrelated failure unwraps to ErrUserNamespaceLost")
	}
}
