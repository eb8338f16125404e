package fdsafe_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/fdsafe/fdprobe"
)

const helperArg = "fdsafe-helper"

func TestMain(m *testing.M) {
	fdprobe.Main(os.Args[1:])
	if len(os.Args) == 3 && os.Args[1] == helperArg {
		os.Exit(helper(os.Args[2] == "mark"))
	}
	os.Exit(m.Run())
}

// helper plays a lazaret process started with inherited descriptors: it
// marks them (as cmd/lazaret does first thing) or not, then starts a child
// the ordinary way (as lazaret starts podman, git, the coordinator).
func helper(mark bool) int {
	if mark {
		if err := fdsafe.MarkInherited(); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			return 2
		}
	}
	child := exec.Command(os.Args[0], fdprobe.Arg)
	child.Stdout, child.Stderr = os.Stdout, os.Stderr
	if err := child.Run(); err != nil {
		return 2
	}
	return 0
}

func probeThroughHelper(t *testing.T, l *fdprobe.Leaks, mode string) fdprobe.Report {
	t.Helper()
	cmd := exec.Command(os.Args[0], helperArg, mode)
	cmd.ExtraFiles = l.Files()
	r, err := fdprobe.Run(cmd)
	if err != nil {
		t.Fatalf("helper %s: %v", mode, err)
	}
	return r
}

// TestMarkInheritedStopsLeaks: a process started with a terminal, a file
// and a pipe inherited without close-on-exec passes none of them to its
// children once it called MarkInherited. Positive control: without the
// call the child holds all three.
func TestMarkInheritedStopsLeaks(t *testing.T) {
	l, err := fdprobe.OpenLeaks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	ctl := probeThroughHelper(t, l, "plain")
	if found := l.FoundIn(ctl); len(found) != 3 {
		t.Fatalf("positive control: child of an unmarked process holds %v, want the pty, the file and the pipe", found)
	}

	r := probeThroughHelper(t, l, "mark")
	if leaked := r.Leaked(); len(leaked) != 0 {
		t.Fatalf("child holds descriptors beyond 0-2: %+v", leaked)
	}
}

// TestMarkByWalk: the fallback for kernels without close_range marks an
// inheritable descriptor close-on-exec. Control: it was inheritable.
func TestMarkByWalk(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := clearCloexec(f); err != nil {
		t.Fatal(err)
	}
	if cloexec(t, f) {
		t.Fatal("positive control: descriptor still close-on-exec")
	}
	if err := fdsafe.MarkByWalk(); err != nil {
		t.Fatal(err)
	}
	if !cloexec(t, f) {
		t.Fatal("descriptor not marked close-on-exec")
	}
}
