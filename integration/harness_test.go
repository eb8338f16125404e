//go:build integration

// Package integration runs lazaret end to end against real rootless podman
// and the pinned runsc. It must run as an unprivileged user with a working
// rootless podman (scripts/setup prepares one; `make test` runs this suite
// as that user). LAZARET_BIN names the directory holding the built
// binaries (lazaret, lazaret-runsc, lazaret-escalate, lazaret-netd).
package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// binDir is where the binaries under test are.
func binDir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("LAZARET_BIN")
	if d == "" {
		t.Fatal("LAZARET_BIN is not set: run the integration suite through `make test` (scripts/integration)")
	}
	return d
}

func TestMain(m *testing.M) {
	if os.Getuid() == 0 {
		fmt.Fprintln(os.Stderr, "integration: refusing to run as root; scripts/integration runs this suite as the unprivileged user")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// Env is one isolated lazaret installation: its own data_root, config file
// and workspace. The user's podman storage and XDG_RUNTIME_DIR are shared
// (podman keeps its state there), so tests tell their resources apart by
// Domain Anchor, which differs per workspace.
type Env struct {
	T         testing.TB
	Root      string // temp dir holding everything below
	DataRoot  string
	Config    string // config file path
	Workspace string
	// ExtraEnv is added to the environment of every lazaret run.
	ExtraEnv []string
	// NoDirect: exec and shell in a workspace that is not a git
	// repository get no --direct (the consent a start without a terminal
	// needs there; withDirect).
	NoDirect bool
}

// NewEnv makes an Env with an empty workspace and a config holding only
// data_root. Its Cleanup stops every sandbox the test started.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	root, err := os.MkdirTemp("", "lzi-")
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, Root: root, DataRoot: filepath.Join(root, "data"), Config: filepath.Join(root, "config.toml"), Workspace: filepath.Join(root, "ws")}
	if err := os.MkdirAll(e.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	e.WriteConfig("")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if e.command(ctx, "stop", "--all").Run() != nil {
			// A test may end on a configuration lazaret refuses (bad
			// input tests): stop with one that holds only data_root, so
			// what its sandboxes left (a spare sidecar) goes too.
			e.WriteConfig("")
			_ = e.command(ctx, "stop", "--all").Run()
		}
		// Files made inside the sandbox belong to sub-uids; remove them
		// from inside the user namespace.
		_ = exec.Command("podman", "unshare", "rm", "-rf", root).Run()
		_ = os.RemoveAll(root)
	})
	return e
}

// WriteConfig writes body after a data_root line into the config file.
func (e *Env) WriteConfig(body string) {
	e.T.Helper()
	text := fmt.Sprintf("data_root = %q\n%s", e.DataRoot, body)
	if err := os.WriteFile(e.Config, []byte(text), 0o600); err != nil {
		e.T.Fatal(err)
	}
}

// withDirect adds --direct to an exec or shell in a workspace that is not
// a git repository: the tests run lazaret without a terminal, where a
// direct-mode start needs it (docs/GITSENTRY.md, "Direct mode").
func (e *Env) withDirect(args []string) []string {
	if e.NoDirect || len(args) == 0 || (args[0] != "exec" && args[0] != "shell") || slices.Contains(args, "--workspace") {
		return args
	}
	if _, err := os.Lstat(filepath.Join(e.Workspace, ".git")); err == nil {
		return args
	}
	return append([]string{args[0], "--direct"}, args[1:]...)
}

func (e *Env) command(ctx context.Context, args ...string) *exec.Cmd {
	args = e.withDirect(args)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir(e.T), "lazaret"), append([]string{"--config", e.Config}, args...)...)
	cmd.Dir = e.Workspace
	cmd.Env = append(os.Environ(), e.ExtraEnv...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Cmd returns an *exec.Cmd running lazaret with args in the workspace.
func (e *Env) Cmd(ctx context.Context, args ...string) *exec.Cmd { return e.command(ctx, args...) }

// Result is a finished lazaret run.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs lazaret with args (stdin empty) and returns its output and exit
// code; it fails the test only if lazaret could not be started or timed out.
func (e *Env) Run(args ...string) Result { return e.RunStdin("", args...) }

// RunStdin is Run with stdin.
func (e *Env) RunStdin(stdin string, args ...string) Result {
	e.T.Helper()
	return e.runFor(3*time.Minute, stdin, args...)
}

// RunLong is Run for a command that may take up to d (a hang guard, not
// a timing check).
func (e *Env) RunLong(d time.Duration, args ...string) Result {
	e.T.Helper()
	return e.runFor(d, "", args...)
}

func (e *Env) runFor(d time.Duration, stdin string, args ...string) Result {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := e.command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.T.Fatalf("lazaret %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		e.T.Fatalf("lazaret %v timed out; stderr: %s", args, errb.String())
	}
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// MustRun is Run that fails the test on a non-zero exit.
func (e *Env) MustRun(args ...string) string {
	e.T.Helper()
	r := e.Run(args...)
	if r.Code != 0 {
		e.T.Fatalf("lazaret %v: exit %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Podman runs podman (as the same unprivileged user) and returns stdout.
func Podman(t testing.TB, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("podman", args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), fmt.Errorf("podman %v: %v: %s", args, err, ee.Stderr)
	}
	return string(out), err
}

// Eventually polls cond every 50 ms until it is true or d passes.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}
