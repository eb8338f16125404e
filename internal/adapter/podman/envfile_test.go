package podman

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// The environment's values never reach podman's argv or its environment:
// they arrive on a descriptor named right after the subcommand, as an env
// file that holds exactly the variables.
func TestCmdEnvFile(t *testing.T) {
	secret := "sk-" + strings.Repeat("s", 40)
	inv, err := ExecArgs(ExecOptions{Container: "c", Command: []string{"env"},
		Env: map[string]string{"API_KEY": secret, "PATH": "/custom/bin", "EMPTY": "", "SPACED": " a = b "}})
	if err != nil {
		t.Fatal(err)
	}
	extra, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	c := &Client{Bin: "/bin/true"}
	cmd, err := c.Cmd(context.Background(), inv, extra)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/bin/true", "exec", "--env-file", "/dev/fd/4", "c", "env"}
	if !slices.Equal(cmd.Args, want) {
		t.Fatalf("argv %q, want %q", cmd.Args, want)
	}
	if strings.Contains(strings.Join(cmd.Args, " "), secret) || slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.Contains(kv, secret) }) {
		t.Fatal("the value is in podman's argv or environment")
	}
	if len(cmd.ExtraFiles) != 2 || cmd.ExtraFiles[0] != extra {
		t.Fatalf("extra files %v", cmd.ExtraFiles)
	}
	got, err := io.ReadAll(cmd.ExtraFiles[1])
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "API_KEY="+secret+"\nEMPTY=\nPATH=/custom/bin\nSPACED= a = b \n" {
		t.Fatalf("env file %q", got)
	}
	// Without an environment nothing is added.
	plain, err := c.Cmd(context.Background(), &Invocation{Args: []string{"ps"}})
	if err != nil || !slices.Equal(plain.Args, []string{"/bin/true", "ps"}) || len(plain.ExtraFiles) != 0 {
		t.Fatalf("plain: %v %q", err, plain.Args)
	}
}

// A large environment does not block on the pipe.
func TestCmdEnvFileLarge(t *testing.T) {
	env := map[string]string{}
	for i := 0; i < 64; i++ {
		env["V"+strings.Repeat("X", i)] = strings.Repeat("v", 4000)
	}
	cmd, err := (&Client{Bin: "/bin/true"}).Cmd(context.Background(), &Invocation{Args: []string{"run"}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(cmd.ExtraFiles[0])
	if err != nil || len(got) != len(envFileContent(env)) {
		t.Fatalf("read %d bytes: %v", len(got), err)
	}
	env["BIG"] = strings.Repeat("x", maxEnvFile)
	if _, err := (&Client{}).Cmd(context.Background(), &Invocation{Args: []string{"run"}, Env: env}); err == nil {
		t.Fatal("an environment over the limit was accepted")
	}
}

// RunDetached hands the environment over the same way and closes its own
// copy of the descriptor.
func TestRunDetachedEnv(t *testing.T) {
	dir := t.TempDir()
	fake := dir + "/podman"
	// The fake podman prints its argv and the file the argv names.
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" > " + dir + "/argv\nwhile [ $# -gt 0 ]; do [ \"$1\" = --env-file ] && cat \"$2\" > " + dir + "/env; shift; done\necho cid\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Client{Bin: fake}
	id, err := c.RunDetached(context.Background(), &ContainerSpec{Name: "n", Image: "i", Env: map[string]string{"TOKEN": "hunter2"}})
	if err != nil || id != "cid" {
		t.Fatalf("%q %v", id, err)
	}
	argv, _ := os.ReadFile(dir + "/argv")
	env, _ := os.ReadFile(dir + "/env")
	if strings.Contains(string(argv), "hunter2") || !strings.HasPrefix(string(argv), "run --env-file /dev/fd/3 --pull=never") {
		t.Fatalf("argv %q", argv)
	}
	if string(env) != "TOKEN=hunter2\n" {
		t.Fatalf("env file %q", env)
	}
}
