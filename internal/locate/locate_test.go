package locate

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestEnvOverride(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "my-runsc")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	t.Setenv("LAZARET_RUNSC", bin)
	got, err := Find(Runsc)
	if err != nil || got != bin {
		t.Fatalf("Find = %q, %v; want %q", got, err, bin)
	}
	notExec := filepath.Join(dir, "plain")
	os.WriteFile(notExec, nil, 0o644)
	t.Setenv("LAZARET_RUNSC", notExec)
	if _, err := Find(Runsc); err == nil {
		t.Fatal("a non-executable override was accepted")
	}
}

func TestNotFoundNamesTheVariable(t *testing.T) {
	t.Setenv("LAZARET_NETD", "")
	t.Setenv("PATH", t.TempDir())
	_, err := Find(Netd)
	if err == nil {
		t.Skip("lazaret-netd found beside the test binary; nothing to check")
	}
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func TestFindOnPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, Escalate)
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	t.Setenv("LAZARET_ESCALATE", "")
	t.Setenv("PATH", dir)
	got, err := Find(Escalate)
	if err != nil || got != bin {
		t.Fatalf("Find = %q, %v; want %q", got, err, bin)
	}
}
