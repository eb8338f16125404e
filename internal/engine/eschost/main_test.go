package eschost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/fdsafe/fdprobe"
)

const execHelperArg = "escalation-exec-helper"

func TestMain(m *testing.M) {
	fdprobe.Main(os.Args[1:])
	if len(os.Args) == 3 && os.Args[1] == execHelperArg {
		os.Exit(execHelper(os.Args[2]))
	}
	os.Exit(m.Run())
}

// execHelper plays a coordinator that inherited descriptors (and, worse
// than the real one, still has the user's terminal as its controlling
// terminal): it runs the probe through the Executor, or ("plain") the way
// a command is started without any of its protections.
func execHelper(mode string) int {
	probe := []string{os.Args[0], fdprobe.Arg}
	if mode == "plain" {
		cmd := exec.Command(probe[0], probe[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		return 0
	}
	dir, err := os.Open("/")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e := &Executor{Env: MinimalEnv("/usr/bin:/bin", "/home/u", "")}
	res, err := e.Run(context.Background(), probe[0], probe, dir, os.Stdout, os.Stderr)
	if err != nil || res.ExitCode != 0 {
		fmt.Fprintln(os.Stderr, "executor:", res.ExitCode, err)
		return 2
	}
	return 0
}
