//go:build integration

package integration

import (
	"strings"
	"testing"
)

// TestDoctorOnPreparedMachine: scripts/setup made this machine ready, so
// every check passes for the unprivileged user and nothing says FAIL.
func TestDoctorOnPreparedMachine(t *testing.T) {
	e := NewEnv(t)
	r := e.Run("doctor")
	if r.Code != 0 || strings.Contains(r.Stdout, "FAIL") {
		t.Fatalf("doctor: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"runsc", "storage driver", "/dev/fuse", "image localhost/lazaret-default"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, r.Stdout)
		}
	}
}

// TestDoctorNamesTheFix: with runsc unreachable, doctor fails with the
// exact remedy instead of a bare error.
func TestDoctorNamesTheFix(t *testing.T) {
	e := NewEnv(t)
	e.ExtraEnv = append(e.ExtraEnv, "LAZARET_RUNSC=/nonexistent/runsc")
	r := e.Run("doctor")
	if r.Code != 3 {
		t.Fatalf("doctor with a missing runsc: exit %d, want 3\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "FAIL  runsc") || !strings.Contains(r.Stdout, "make setup") {
		t.Fatalf("doctor does not name the fix:\n%s", r.Stdout)
	}
}

// TestImageBuildIsIdempotent: images built from the same recipe are kept,
// so a second `lazaret image build` (as run by every make test) is quick.
func TestImageBuildIsIdempotent(t *testing.T) {
	e := NewEnv(t)
	r := e.Run("image", "build")
	if r.Code != 0 {
		t.Fatalf("image build: exit %d\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "localhost/lazaret-default:latest is up to date") {
		t.Fatalf("default image rebuilt although its recipe is unchanged:\n%s", r.Stderr)
	}
}
