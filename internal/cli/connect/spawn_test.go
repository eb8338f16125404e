package connect

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/fdsafe/fdprobe"
)

// TestStartCoordinatorDescriptors: a CLI holding a terminal, a file and a
// pipe without close-on-exec (as a terminal emulator or IDE leaves them)
// starts a coordinator that holds exactly stdin /dev/null and stdout and
// stderr on its log, in a session of its own without a terminal.
// Positive control: a child started the plain way from the same process
// holds all three leaks.
func TestStartCoordinatorDescriptors(t *testing.T) {
	a := testAnchor(t)
	l, err := fdprobe.OpenLeaks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.ClearCloexec(); err != nil {
		t.Fatal(err)
	}

	ctl, err := exec.Command(os.Args[0], fdprobe.Arg).Output()
	if err != nil {
		t.Fatal(err)
	}
	cr, err := fdprobe.Parse(ctl)
	if err != nil {
		t.Fatal(err)
	}
	if found := l.FoundIn(cr); len(found) != 3 {
		t.Fatalf("positive control: a plain child holds %v, want the pty, the file and the pipe", found)
	}

	exited, err := startCoordinator(a, Spawn{Exe: os.Args[0], Args: []string{fdprobe.Arg}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(a.CoordinatorLog())
	if err != nil {
		t.Fatal(err)
	}
	r, err := fdprobe.Parse(log)
	if err != nil {
		t.Fatal(err)
	}
	checkStdOnly(t, r, a.CoordinatorLog())
	if r.SID != r.PID || r.DevTTY == "" || r.Injected() {
		t.Fatalf("coordinator: sid %d pid %d, /dev/tty error %q, injected %v: want its own session and no terminal", r.SID, r.PID, r.DevTTY, r.Injected())
	}
}

// checkStdOnly asserts the probe inherited exactly 0 = /dev/null and 1, 2
// = out.
func checkStdOnly(t *testing.T, r fdprobe.Report, out string) {
	t.Helper()
	fds := r.Targets()
	if len(fds) != 3 || fds[0] != os.DevNull || fds[1] != out || fds[2] != out {
		t.Fatalf("inherited %v, want exactly 0=%s 1=2=%s", fds, os.DevNull, out)
	}
}

// TestStartCoordinatorDesktopEnv: the coordinator finds the user's
// session bus (its desktop notifier, [notify] desktop) as the CLI would:
// DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR reach it, with and without
// the secrets' source variables added.
func TestStartCoordinatorDesktopEnv(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	for _, env := range [][]string{nil, {"LZT_SECRET_SOURCE=v"}} {
		a := testAnchor(t)
		exited, err := startCoordinator(a, Spawn{Exe: os.Args[0], Args: []string{fdprobe.Arg}, Env: env}, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-exited; err != nil {
			t.Fatal(err)
		}
		log, err := os.ReadFile(a.CoordinatorLog())
		if err != nil {
			t.Fatal(err)
		}
		r, err := fdprobe.Parse(log)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range append([]string{"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus", "XDG_RUNTIME_DIR=/run/user/1000"}, env...) {
			if !slices.Contains(r.Env, want) {
				t.Errorf("Env %v: the coordinator lacks %s", env, want)
			}
		}
	}
}
