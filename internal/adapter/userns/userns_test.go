package userns

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
)

// fakePodman is a podman that records its argv (NUL-separated) in the file
// it returns, prints $OUT and exits with $CODE.
func fakePodman(t *testing.T, out string, code int) (*podman.Client, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "argv")
	bin := filepath.Join(dir, "podman")
	script := "#!/bin/sh\nprintf '%s\\0' \"$@\" > '" + log + "'\nprintf %s \"$OUT\"\necho oops >&2\nexit $CODE\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "OUT=" + out, "CODE=" + string(rune('0'+code)), "XDG_RUNTIME_DIR=" + dir}
	return &podman.Client{Bin: bin, Env: env}, log
}

func argv(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// With no pause process to join (or a podman that is not the real one),
// a command runs as `podman unshare COMMAND`, its stdout returned.
func TestRunIsPodmanUnshare(t *testing.T) {
	pc, log := fakePodman(t, "hello", 0)
	out, err := New(pc).Run(context.Background(), "rm", "-rf", "--", "/x")
	if err != nil || string(out) != "hello" {
		t.Fatalf("Run = %q, %v", out, err)
	}
	if got, want := argv(t, log), []string{"unshare", "rm", "-rf", "--", "/x"}; !slices.Equal(got, want) {
		t.Errorf("podman argv %q, want %q", got, want)
	}
	if _, err := New(pc).Run(context.Background()); err == nil {
		t.Error("Run with no command: no error")
	}
}

// A failure is podman's *Error of unshare, as users saw it before.
func TestRunFailureIsPodmanError(t *testing.T) {
	pc, _ := fakePodman(t, "", 3)
	_, err := New(pc).Run(context.Background(), "false")
	var pe *podman.Error
	if !errors.As(err, &pe) || pe.ExitCode != 3 || !strings.HasPrefix(err.Error(), "podman unshare") {
		t.Errorf("err = %v", err)
	}
}

func TestMountinfoWithoutPauseProcess(t *testing.T) {
	pc, log := fakePodman(t, "table", 0)
	out, err := New(pc).Mountinfo(context.Background())
	if err != nil || string(out) != "table" {
		t.Fatalf("Mountinfo = %q, %v", out, err)
	}
	if got, want := argv(t, log), []string{"unshare", "cat", "/proc/self/mountinfo"}; !slices.Equal(got, want) {
		t.Errorf("podman argv %q, want %q", got, want)
	}
}

func TestJoin(t *testing.T) {
	if got, want := joinArgs(42, []string{"slirp4netns", "tap0"}), []string{"-U", "-m", "-t", "42", "--", "slirp4netns", "tap0"}; !slices.Equal(got, want) {
		t.Errorf("joinArgs = %q, want %q", got, want)
	}
	pc, _ := fakePodman(t, "", 0) // XDG_RUNTIME_DIR without a pause pid file
	if cmd, ok := New(pc).JoinCommand("true"); ok {
		t.Errorf("JoinCommand without a pause process = %v", cmd.Args)
	}
}
