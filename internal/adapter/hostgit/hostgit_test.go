package hostgit

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestEnvironmentDropsGitVariables(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='touch /tmp/x'")
	for _, kv := range env() {
		if strings.HasPrefix(kv, "GIT_DIR=") || strings.HasPrefix(kv, "GIT_CONFIG_PARAMETERS=") {
			t.Errorf("inherited %s", kv)
		}
	}
}

func TestErrors(t *testing.T) {
	g := &Git{}
	_, err := g.RepoPaths(context.Background(), t.TempDir())
	var ge *Error
	if !errors.As(err, &ge) || ge.ExitCode == 0 || !strings.HasPrefix(err.Error(), "git rev-parse: ") {
		t.Errorf("outside a repository: %v", err)
	}
	g = &Git{Bin: "/nonexistent/git"}
	if _, err := g.RepoPaths(context.Background(), t.TempDir()); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("missing git: %v", err)
	}
}
