package sandbox

import (
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

func specFixture(t *testing.T) (*config.Profile, *domain.Anchor) {
	t.Helper()
	p := &config.Profile{Name: "claude", Image: "localhost/x:1", Env: map[string]string{"TERM": "xterm"}}
	a := &domain.Anchor{Profile: "claude", Workspace: "/home/u/proj", Hash: "0123456789ab", DataRoot: "/home/u/.local/share/lazaret"}
	return p, a
}

func runArgs(t *testing.T, spec *podman.ContainerSpec) string {
	t.Helper()
	inv, err := (&podman.Client{Runtime: "/x/lazaret-runsc"}).RunArgs(spec)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(inv.Args, " ")
}

func TestNewSpecHardening(t *testing.T) {
	p, a := specFixture(t)
	vols := []config.ResolvedVolume{{Host: "/home/u/.local/share/lazaret/claude/home", Container: "/root/", Options: []string{"z"}}}
	spec, err := NewSpec(p, a, vols)
	if err != nil {
		t.Fatal(err)
	}
	Finalize(spec, a)
	got := runArgs(t, spec)
	for _, want := range []string{
		"--replace --name lazaret-claude-0123456789ab",
		"--runtime /x/lazaret-runsc",
		"--label lazaret.domain=0123456789ab",
		"--label lazaret.profile=claude",
		"--mount type=bind,source=/home/u/proj,destination=/workspace,relabel=shared",
		"--mount type=bind,source=/home/u/.local/share/lazaret/claude/home,destination=/root,relabel=shared",
		"--network none",
		"--cap-drop ALL",
		"--security-opt no-new-privileges",
		"--pids-limit 4096",
		"--ulimit nproc=4096:4096",
		"--workdir /workspace",
		"localhost/x:1 /bin/sh -c",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	// The environment travels beside the argv (podman.Invocation).
	if spec.Env["TERM"] != "xterm" || spec.Env["LAZARET_DOMAIN"] != "0123456789ab" || strings.Contains(got, "--env") {
		t.Errorf("env %v; argv %s", spec.Env, got)
	}
	var added []string
	for i, a := range strings.Fields(got) {
		if a == "--cap-add" {
			added = append(added, strings.Fields(got)[i+1])
		}
	}
	slices.Sort(added)
	want := []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"}
	if !slices.Equal(added, want) {
		t.Errorf("cap-add %v, want %v", added, want)
	}
}

// A component that mounts /workspace (Git Sentry in branch mode) or sets a
// network (the sidecar) is not overridden.
func TestFinalizeKeepsComponentChoices(t *testing.T) {
	p, a := specFixture(t)
	spec, err := NewSpec(p, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec.Mounts = append(spec.Mounts, podman.Mount{Type: "bind", Source: "/clone", Target: "/workspace/"})
	spec.Network = "container:lazaret-net-0123456789ab"
	Finalize(spec, a)
	got := runArgs(t, spec)
	if strings.Contains(got, "source=/home/u/proj") {
		t.Errorf("host workspace mounted despite a component's /workspace:\n%s", got)
	}
	if !strings.Contains(got, "--network container:lazaret-net-0123456789ab") || strings.Contains(got, "--network none") {
		t.Errorf("network overridden:\n%s", got)
	}
}

func TestNewSpecRejectsRelativeVolume(t *testing.T) {
	p, a := specFixture(t)
	if _, err := NewSpec(p, a, []config.ResolvedVolume{{Host: "/h", Container: "rel"}}); err == nil {
		t.Fatal("relative container path accepted")
	}
}

func TestNewSpecGitSafeDirectory(t *testing.T) {
	p, a := specFixture(t)
	spec, err := NewSpec(p, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Env["GIT_CONFIG_KEY_0"] != "safe.directory" || spec.Env["GIT_CONFIG_VALUE_0"] != WorkspaceDir || spec.Env["GIT_CONFIG_COUNT"] != "1" {
		t.Fatalf("env %v lacks safe.directory for %s", spec.Env, WorkspaceDir)
	}
	// A profile that passes its own command-line git config keeps it.
	p.Env = map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.editor", "GIT_CONFIG_VALUE_0": "vi"}
	spec, err = NewSpec(p, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Env["GIT_CONFIG_KEY_0"] != "core.editor" {
		t.Fatalf("profile's GIT_CONFIG_* overwritten: %v", spec.Env)
	}
}

func TestNewSpecRefusesMultilineEnv(t *testing.T) {
	p, a := specFixture(t)
	p.Env = map[string]string{"PEM": "-----BEGIN\nx"}
	if _, err := NewSpec(p, a, nil); err == nil || !strings.Contains(err.Error(), "profile claude: env: environment variable PEM") {
		t.Fatalf("err %v", err)
	}
}
