package cli

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// TestDirectExecChoosesThePath: runsc exec when the coordinator names the
// container and runsc's state for it is readable; podman exec for an
// older coordinator, a user other than the container's, a container
// runsc does not know, or on request (LAZARET_EXEC_PATH=podman).
func TestDirectExecChoosesThePath(t *testing.T) {
	id := strings.Repeat("a", 64)
	rt := t.TempDir()
	if err := os.Mkdir(filepath.Join(rt, "runsc"), 0o700); err != nil {
		t.Fatal(err)
	}
	state := `{"id":"` + id + `","status":"running","spec":{"process":{"user":{"uid":0,"gid":0},"env":["HOME=/root"],"cwd":"/","capabilities":{"bounding":["CAP_KILL"]}}}}`
	if err := os.WriteFile(filepath.Join(rt, "runsc", id+"_sandbox:"+id+".state"), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	runsc := filepath.Join(t.TempDir(), "runsc")
	if err := os.WriteFile(runsc, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", rt)
	t.Setenv("LAZARET_RUNSC", runsc)
	s := &session{g: &globalOptions{log: slog.New(slog.DiscardHandler)}}
	o := podman.ExecOptions{Container: "c", Command: []string{"true"}, Workdir: "/workspace"}
	spec := ctl.ExecSpec{Container: "c", ContainerID: id}

	d := s.directExec(spec, o)
	if d == nil {
		t.Fatal("control: no runsc exec for a readable running container")
	}
	if d.Cmd.Path != runsc || d.Cmd.Args[len(d.Cmd.Args)-1] != id {
		t.Errorf("runsc exec = %q", d.Cmd.Args)
	}
	d.Started()

	other := spec
	other.ContainerID = strings.Repeat("b", 64)
	withUser := o
	withUser.User = "1000"
	for name, got := range map[string]func() bool{
		"older coordinator": func() bool { return s.directExec(ctl.ExecSpec{Container: "c"}, o) == nil },
		"another user":      func() bool { return s.directExec(spec, withUser) == nil },
		"unknown container": func() bool { return s.directExec(other, o) == nil },
		"requested podman": func() bool {
			t.Setenv(execPathEnv, "podman")
			defer os.Unsetenv(execPathEnv)
			return s.directExec(spec, o) == nil
		},
	} {
		if !got() {
			t.Errorf("%s: runsc exec chosen, want podman exec", name)
		}
	}
}
