package podkeep

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	podkeep "github.com/lazaret-dev/lazaret/internal/wire/podkeep"
)

// The real `__podkeep run`/`attach` of the in-sandbox client, run as an
// exec would: stdin and stdout pipes, no TTY, the daemon in its own
// session.

// buildClient builds the in-sandbox client into a temp dir.
func buildClient(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "lazaret-escalate-go")
	if b, err := exec.Command("go", "build", "-o", bin, "../../../cmd/lazaret-escalate-go").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	return bin
}

type linkEnd struct {
	code  int
	ended bool
	err   error
}

// link runs argv as the exec would (stdin and stdout pipes, no TTY),
// serves one link over it, then cuts it (closes the pipes) and returns
// the program's exit code too.
func link(t *testing.T, c *podkeep.Client, argv []string, keys <-chan []byte, hangup <-chan struct{}) (linkEnd, int) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, ended, err := c.Serve(ctx, in, out, keys, nil, hangup)
	in.Close()
	werr := cmd.Wait()
	if werr != nil && stderr.Len() > 0 {
		t.Logf("%v: %v: %s", argv[1:3], werr, stderr.String())
	}
	return linkEnd{code, ended, err}, cmd.ProcessState.ExitCode()
}

// TestPodKeepRelink runs the real `__podkeep run`, cuts its link before
// the command's last output, links again with attach from the client's
// offset (every byte once, in order, then exit 7) and, as the control,
// from offset 0 (the start again).
func TestPodKeepRelink(t *testing.T) {
	bin := buildClient(t)
	for _, fromZero := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "s.term")
		var all bytes.Buffer
		keys := make(chan []byte, 1)
		c := &podkeep.Client{Out: &cutter{to: &all, keys: keys}}
		r, _ := link(t, c, podkeep.RunArgv(bin, dir, []string{"sh", "-c", script}), keys, nil)
		t.Cleanup(func() { hangUp(bin, dir) })
		if r.ended || !errors.Is(r.err, errCut) || strings.Contains(all.String(), "n1") {
			t.Fatalf("first link: %+v, output %q", r, all.String())
		}
		time.Sleep(300 * time.Millisecond) // the rest runs while away
		c.Out = &all
		if fromZero {
			c.Offset = 0
		}
		r, code := link(t, c, podkeep.AttachArgv(bin, dir), keys, nil)
		if !r.ended || r.code != 7 || code != 0 {
			t.Fatalf("second link: %+v, attach exited %d", r, code)
		}
		if fromZero {
			if strings.Count(all.String(), "one\r\n") != 2 {
				t.Fatalf("control: output %q, want the start twice", all.String())
			}
			waitGone(t, dir)
			continue
		}
		if all.String() != wantAll {
			t.Fatalf("output %q, want %q", all.String(), wantAll)
		}
		waitGone(t, dir)
		if r, code := link(t, &podkeep.Client{Out: io.Discard}, podkeep.AttachArgv(bin, dir), nil, nil); r.ended || code != podkeep.ExitNoSession {
			t.Fatalf("attach after the end: %+v, exit %d, want %d", r, code, podkeep.ExitNoSession)
		}
	}
}

// TestPodKeepHangup: Hangup through the real daemon ends the command by
// SIGHUP (the daemon's own hang-up handling is not inherited).
func TestPodKeepHangup(t *testing.T) {
	bin := buildClient(t)
	dir := filepath.Join(t.TempDir(), "h.term")
	hangup := make(chan struct{})
	c := &podkeep.Client{Out: &closeOn{want: "ready", ch: hangup}}
	r, _ := link(t, c, podkeep.RunArgv(bin, dir, []string{"sh", "-c", "echo ready; sleep 100"}), nil, hangup)
	t.Cleanup(func() { hangUp(bin, dir) })
	if !r.ended || r.code != 129 {
		t.Fatalf("link: %+v, want exit 129", r)
	}
	waitGone(t, dir)
}

// waitGone waits for the keeper to remove its directory.
func waitGone(t *testing.T, dir string) {
	t.Helper()
	for i := 0; i < 250; i++ {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s still there after the session's end", dir)
}

// hangUp ends a keeper a failed test left behind: Hangup, then the
// exit acknowledged.
func hangUp(bin, dir string) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	closed := make(chan struct{})
	close(closed)
	cmd := exec.Command(bin, podkeep.AttachArgv(bin, dir)[1:]...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if cmd.Start() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, _ = (&podkeep.Client{Out: io.Discard}).Serve(ctx, in, out, nil, nil, closed)
	in.Close()
	_ = cmd.Wait()
}
