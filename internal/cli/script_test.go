package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/lazaret-dev/lazaret/internal/cli"
	"github.com/lazaret-dev/lazaret/internal/coordinator/entry"
	"github.com/lazaret-dev/lazaret/internal/wire/coordargs"
)

// TestMain lets testscript run the real lazaret main as the "lazaret"
// command of the scripts (the test binary re-executes itself).
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"lazaret": lazaretMain,
	})
}

// TestScripts runs the CLI end-to-end scripts of testdata/script. Each
// script gets its own HOME and XDG directories under $WORK, and its own
// data directory $DATA ($XDG_DATA_HOME) outside it.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			work, err := filepath.EvalSymlinks(e.WorkDir)
			if err != nil {
				return err
			}
			// The data root lives outside $WORK ($DATA), so that scripts
			// may run lazaret in $WORK itself: a workspace containing the
			// data root is refused.
			data, err := os.MkdirTemp("", "lazaret-script-data-")
			if err != nil {
				return err
			}
			e.Defer(func() { os.RemoveAll(data) })
			if data, err = filepath.EvalSymlinks(data); err != nil {
				return err
			}
			for _, d := range []string{"home", ".config", ".run"} {
				if err := os.MkdirAll(filepath.Join(work, d), 0o700); err != nil {
					return err
				}
			}
			repo, err := filepath.Abs(filepath.Join("..", ".."))
			if err != nil {
				return err
			}
			e.Setenv("REPO", repo) // for scripts that check the Makefile
			e.Setenv("WORK", work)
			e.Setenv("DATA", data)
			e.Setenv("HOME", filepath.Join(work, "home"))
			e.Setenv("XDG_CONFIG_HOME", filepath.Join(work, ".config"))
			e.Setenv("XDG_DATA_HOME", data)
			e.Setenv("XDG_RUNTIME_DIR", filepath.Join(work, ".run"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exitcode N cmd args... runs cmd and requires exit status N;
			// stdout and stderr are kept for the following assertions.
			"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exitcode N command [args...]")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exitcode: %v", err)
				}
				got := 0
				var ee *exec.ExitError
				if err := ts.Exec(args[1], args[2:]...); errors.As(err, &ee) {
					got = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("exitcode: %v", err)
				}
				if got != want {
					ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
				}
			},
		},
	})
}

// lazaretMain is cmd/lazaret's main: the coordinator's entry for its
// hidden verb, so the scripts' lazaret runs a real coordinator, and the
// CLI otherwise.
func lazaretMain() {
	if len(os.Args) > 1 && os.Args[1] == coordargs.Verb {
		os.Exit(entry.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(cli.Main(os.Args))
}
