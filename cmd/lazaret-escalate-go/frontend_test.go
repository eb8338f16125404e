package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/insandbox/escclient"
	"github.com/lazaret-dev/lazaret/internal/version"
)

// buildFrontEnd compiles the C front end as `make build` does.
func buildFrontEnd(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the C front end")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	out := filepath.Join(t.TempDir(), "lazaret-escalate")
	if b, err := exec.Command(gcc, "-static", "-O2", "-Wall", "-Werror", "-o", out, "../lazaret-escalate/main.c", "../lazaret-escalate/holder.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	return out
}

// fakeGo is a stand-in for the Go client that records that it ran.
func fakeGo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "go-client")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho \"go client: $*\"\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// serve runs a broker (with run, or the real client logic when nil) on a
// fresh socket.
func serve(t *testing.T, run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&escclient.Broker{Run: run}).Serve(ctx, ln)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

// runFE runs the front end with args and env (plus PATH) in dir.
func runFE(t *testing.T, fe, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(fe, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), code
}

func TestFrontEndThroughBroker(t *testing.T) {
	fe := buildFrontEnd(t)
	var gotArgs []string
	var gotEnv map[string]string
	sock := serve(t, func(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		gotArgs = args
		gotEnv = map[string]string{}
		for _, k := range []string{"LAZARET_SESSION_ID", escclient.EnvCwd, "PATH", "HOME"} {
			gotEnv[k] = getenv(k)
		}
		_, _ = stdout.Write(bytes.Repeat([]byte("o"), 200000))
		_, _ = io.WriteString(stderr, "to stderr\n")
		return 3
	})
	dir := t.TempDir()
	out, errOut, code := runFE(t, fe, dir, []string{"LAZARET_ESCALATE_BROKER=" + sock, "LAZARET_ESCALATE_FALLBACK=" + fakeGo(t),
		"LAZARET_SESSION_ID=s-1", "HOME=/root"}, "--", "echo", "", "a b;c")
	if code != 3 || out != strings.Repeat("o", 200000) || errOut != "to stderr\n" {
		t.Fatalf("code %d, stdout %d bytes, stderr %q", code, len(out), errOut)
	}
	if strings.Join(gotArgs, "|") != fe+"|--|echo||a b;c" {
		t.Fatalf("args %q", gotArgs)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if gotEnv["LAZARET_SESSION_ID"] != "s-1" || gotEnv[escclient.EnvCwd] != real || gotEnv["PATH"] != "" || gotEnv["HOME"] != "" {
		t.Fatalf("env %v (cwd want %s)", gotEnv, real)
	}
}

func TestFrontEndRealClientLogic(t *testing.T) {
	fe := buildFrontEnd(t)
	sock := serve(t, nil)
	env := []string{"LAZARET_ESCALATE_BROKER=" + sock, "LAZARET_ESCALATE_FALLBACK=" + fakeGo(t)}
	out, _, code := runFE(t, fe, t.TempDir(), env, "--version")
	if code != 0 || out != "lazaret-escalate "+version.Version+"\n" {
		t.Fatalf("--version: %d %q", code, out)
	}
	_, errOut, code := runFE(t, fe, t.TempDir(), env, "--", "true")
	if code != escclient.ExitFailure || !strings.Contains(errOut, "LAZARET_") {
		t.Fatalf("no session: %d %q", code, errOut)
	}
	if _, _, code := runFE(t, fe, t.TempDir(), env); code != escclient.ExitUsage {
		t.Fatalf("no command: %d", code)
	}
}

func TestFrontEndFallsBack(t *testing.T) {
	fe := buildFrontEnd(t)
	goClient := fakeGo(t)
	dir := t.TempDir()
	// No socket.
	out, _, code := runFE(t, fe, dir, []string{"LAZARET_ESCALATE_BROKER=" + filepath.Join(dir, "none"), "LAZARET_ESCALATE_FALLBACK=" + goClient}, "--", "true")
	if code != 7 || out != "go client: -- true\n" {
		t.Fatalf("no socket: %d %q", code, out)
	}
	// A socket nobody listens on (the broker died).
	stale := filepath.Join(dir, "stale")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if out, _, code := runFE(t, fe, dir, []string{"LAZARET_ESCALATE_BROKER=" + stale, "LAZARET_ESCALATE_FALLBACK=" + goClient}, "x"); code != 7 || out != "go client: x\n" {
		t.Fatalf("stale socket: %d %q", code, out)
	}
	// A broker that answers without acknowledging.
	for name, answer := range map[string]string{"closes": "", "garbage": "HTTP/1.1 400\r\n", "output first": "o\x00\x00\x00\x01x"} {
		sock := oneShotBroker(t, answer)
		if out, _, code := runFE(t, fe, dir, []string{"LAZARET_ESCALATE_BROKER=" + sock, "LAZARET_ESCALATE_FALLBACK=" + goClient}, "y"); code != 7 || out != "go client: y\n" {
			t.Fatalf("%s: %d %q", name, code, out)
		}
	}
}

func TestFrontEndNoRetryAfterAck(t *testing.T) {
	fe := buildFrontEnd(t)
	for name, answer := range map[string]string{"eof": "k\x00\x00\x00\x00o\x00\x00\x00\x02hi", "bad code": "k\x00\x00\x00\x00x\x00\x00\x00\x01\x00",
		"huge frame": "k\x00\x00\x00\x00o\xff\xff\xff\xff", "unknown": "k\x00\x00\x00\x00z\x00\x00\x00\x00"} {
		sock := oneShotBroker(t, answer)
		out, errOut, code := runFE(t, fe, t.TempDir(), []string{"LAZARET_ESCALATE_BROKER=" + sock, "LAZARET_ESCALATE_FALLBACK=" + fakeGo(t)}, "y")
		if code != escclient.ExitFailure || strings.Contains(out, "go client") || !strings.Contains(errOut, "broker") {
			t.Fatalf("%s: %d %q %q", name, code, out, errOut)
		}
	}
}

func TestFrontEndTooLargeFallsBack(t *testing.T) {
	fe := buildFrontEnd(t)
	sock := serve(t, func(context.Context, []string, func(string) string, io.Writer, io.Writer) int {
		t.Error("an oversized request reached the broker")
		return 0
	})
	out, _, code := runFE(t, fe, t.TempDir(), []string{"LAZARET_ESCALATE_BROKER=" + sock, "LAZARET_ESCALATE_FALLBACK=" + fakeGo(t)},
		"--", strings.Repeat("x", 100000), strings.Repeat("y", 100000), strings.Repeat("z", 100000))
	if code != 7 || !strings.HasPrefix(out, "go client: -- xxx") {
		t.Fatalf("%d %.40q", code, out)
	}
}

// oneShotBroker listens on a new socket, and to its one connection writes
// answer after reading the request's header, then closes; it returns the
// socket's path.
func oneShotBroker(t *testing.T, answer string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.ReadFull(c, make([]byte, 8))
			_, _ = io.WriteString(c, answer)
			c.Close()
		}
		ln.Close()
	}()
	return sock
}
