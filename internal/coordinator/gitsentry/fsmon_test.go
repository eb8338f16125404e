package gitsentry

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
)

func TestAddGitConfigEnv(t *testing.T) {
	env := map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "/workspace"}
	if err := AddGitConfigEnv(env, "a.b", "1", "c.d", "2"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"GIT_CONFIG_COUNT": "3", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "/workspace",
		"GIT_CONFIG_KEY_1": "a.b", "GIT_CONFIG_VALUE_1": "1", "GIT_CONFIG_KEY_2": "c.d", "GIT_CONFIG_VALUE_2": "2"}
	if len(env) != len(want) {
		t.Fatalf("env = %v", env)
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	empty := map[string]string{}
	if err := AddGitConfigEnv(empty, "a.b", "1"); err != nil || empty["GIT_CONFIG_COUNT"] != "1" || empty["GIT_CONFIG_KEY_0"] != "a.b" {
		t.Errorf("from nothing: %v, %v", empty, err)
	}
	bad := map[string]string{"GIT_CONFIG_COUNT": "x"}
	if err := AddGitConfigEnv(bad, "a.b", "1"); err == nil || bad["GIT_CONFIG_COUNT"] != "x" {
		t.Errorf("a bad count was extended: %v, %v", bad, err)
	}
}

func hasMount(spec *podman.ContainerSpec, target string) bool {
	for _, m := range spec.Mounts {
		if m.Target == target {
			return true
		}
	}
	return false
}

// The fsmonitor is set up in branch mode only: in direct mode the user
// edits the tree from the host, which the sandbox's inotify never sees.
func TestPrepareFSMonitorBranchModeOnly(t *testing.T) {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "lazaret-fsmonitor")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)

	ws := gittest.NewRepo(t)
	c := New(gittest.Anchor(t, ws, "p1"), "", nil, nil)
	c.FSMonitor = bin
	spec := &podman.ContainerSpec{Env: map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "/workspace"}}
	if err := c.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if spec.Env["GIT_CONFIG_COUNT"] != "3" || spec.Env["GIT_CONFIG_KEY_1"] != "core.fsmonitor" ||
		spec.Env["GIT_CONFIG_VALUE_1"] != ContainerFSMonitorBin || spec.Env["GIT_CONFIG_VALUE_2"] != "2" ||
		spec.Env["GIT_CONFIG_VALUE_0"] != "/workspace" {
		t.Errorf("branch mode env: %v", spec.Env)
	}
	if !hasMount(spec, ContainerFSMonitorBin) || !hasMount(spec, ContainerFSMonitorDir) {
		t.Errorf("branch mode mounts: %v", spec.Mounts)
	}

	direct := New(gittest.Anchor(t, ws, "p2"), gitrepo.ModeDirect, nil, nil)
	direct.FSMonitor = bin
	dspec := &podman.ContainerSpec{Env: map[string]string{}}
	if err := direct.Prepare(ctx, dspec); err != nil {
		t.Fatal(err)
	}
	if dspec.Env["GIT_CONFIG_COUNT"] != "" || hasMount(dspec, ContainerFSMonitorBin) {
		t.Errorf("direct mode got the fsmonitor: %v %v", dspec.Env, dspec.Mounts)
	}

	off := New(gittest.Anchor(t, ws, "p3"), "", nil, nil)
	off.FSMonitor, off.NoFSMonitor = bin, true
	ospec := &podman.ContainerSpec{}
	if err := off.Prepare(ctx, ospec); err != nil {
		t.Fatal(err)
	}
	if ospec.Env["GIT_CONFIG_COUNT"] != "" || hasMount(ospec, ContainerFSMonitorBin) {
		t.Errorf("NoFSMonitor: %v %v", ospec.Env, ospec.Mounts)
	}
}
