package runscexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazaret-dev/lazaret/internal/capped"
	"github.com/lazaret-dev/lazaret/internal/pipedata"
)

// Exec is one command's runsc exec, not yet started. Its descriptors, in
// runsc: 0 and 1 /dev/null, 2 a pipe this process reads (runsc's own
// messages, told apart from the command's output), 3.. the caller's extra
// files (passed to the command as the same numbers: the session holder's
// delegation socket is its descriptor 3), then the process spec (a pipe:
// the environment's values are never in a file or an argv), then the
// three that become the command's 0, 1 and 2 (Wire).
type Exec struct {
	Cmd    *exec.Cmd
	stdio  int // runsc's descriptor that becomes the command's 0
	stderr *capped.Buffer

	mu      sync.Mutex
	child   []*os.File // this process's copies of runsc's ends
	outputs []*os.File // the read ends of the output pipes
	stdinW  *os.File
	copies  sync.WaitGroup
}

// Command returns the runsc exec of o in c. runsc is the binary, flags
// its global flags (the shim's, so the same as podman's runsc), extra
// the descriptors passed on from 3.
func (c *Container) Command(ctx context.Context, runsc string, flags []string, o Options, extra []*os.File) (*Exec, error) {
	spec, err := c.Process(o)
	if err != nil {
		return nil, err
	}
	r, err := pipedata.Reader(spec)
	if err != nil {
		return nil, fmt.Errorf("runsc exec: process spec: %w", err)
	}
	specFD := 3 + len(extra)
	e := &Exec{stdio: specFD + 1, stderr: &capped.Buffer{Max: 64 << 10}}
	args := append(append([]string(nil), flags...), "--root", c.Root, "exec", "--process", "/dev/fd/"+strconv.Itoa(specFD))
	for i := range extra {
		args = append(args, fmt.Sprintf("--pass-fd=%d:%d", 3+i, 3+i))
	}
	for g := 0; g < 3; g++ {
		args = append(args, fmt.Sprintf("--pass-fd=%d:%d", e.stdio+g, g))
	}
	// The container ID ends runsc's flags.
	args = append(args, c.ID)
	cmd := exec.CommandContext(ctx, runsc, args...)
	cmd.Env = []string{} // nothing of this process's environment reaches runsc
	cmd.Stderr = e.stderr
	// runsc's own stderr is copied by exec.Cmd; nothing else should hold
	// it, but a wait must not hang on it after runsc is gone.
	cmd.WaitDelay = time.Second
	cmd.ExtraFiles = append(append([]*os.File(nil), extra...), r)
	e.child = append(e.child, r)
	e.Cmd = cmd
	return e, nil
}

// Wire hands in, out and errOut to the command (before Start) and returns
// the descriptor, in runsc, of the command's standard input (the
// controlling terminal when tty). With tty they are the session's PTY and
// go as they are; otherwise each is a new pipe that this process copies
// (Started, Done), so the sandbox never holds the caller's own terminal
// or files. A nil in gives the command /dev/null.
func (e *Exec) Wire(in, out, errOut *os.File, tty bool) (int, error) {
	if tty {
		e.Cmd.ExtraFiles = append(e.Cmd.ExtraFiles, in, out, errOut)
		return e.stdio, nil
	}
	stdin, err := e.stdinFor(in)
	if err != nil {
		return 0, err
	}
	files := []*os.File{stdin}
	for _, dst := range []*os.File{out, errOut} {
		r, w, err := os.Pipe()
		if err != nil {
			e.closeAll()
			return 0, err
		}
		e.child, e.outputs = append(e.child, w), append(e.outputs, r)
		files = append(files, w)
		e.copies.Add(1)
		go func() {
			defer e.copies.Done()
			copyOut(dst, r)
		}()
	}
	e.Cmd.ExtraFiles = append(e.Cmd.ExtraFiles, files...)
	return e.stdio, nil
}

func (e *Exec) stdinFor(in *os.File) (*os.File, error) {
	if in == nil {
		f, err := os.Open(os.DevNull)
		if err == nil {
			e.child = append(e.child, f)
		}
		return f, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	e.child, e.stdinW = append(e.child, r), w
	go func() {
		_, _ = io.Copy(w, in)
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.stdinW != nil {
			e.stdinW.Close() // EOF for the command
			e.stdinW = nil
		}
	}()
	return r, nil
}

// Started closes this process's copies of what runsc now holds (after
// Start, or after a failed Start), so the command's output pipes end when
// the command and runsc are gone.
func (e *Exec) Started() {
	for _, f := range e.child {
		f.Close()
	}
	e.child = nil
}

// drainWait bounds the copy of output still in the pipes after runsc
// returned: the command has exited, so what it wrote is there already; a
// background process it left holding the pipe does not keep the session
// open (podman exec returns at the command's exit too).
const drainWait = 20 * time.Millisecond

// copyOut copies r to dst until EOF or until Done's deadline; then it
// takes what is still in the pipe without waiting (a read past the
// deadline would leave it there).
func copyOut(dst io.Writer, r *os.File) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			drain(dst, r, buf)
			return
		}
		if err != nil {
			return
		}
	}
}

// drain writes to dst what r (a non-blocking pipe) holds now.
func drain(dst io.Writer, r *os.File, buf []byte) {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		for {
			n, err := unix.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	})
}

// Done ends the copies after runsc exited (Cmd.Wait returned).
func (e *Exec) Done() {
	deadline := time.Now().Add(drainWait)
	for _, r := range e.outputs {
		_ = r.SetReadDeadline(deadline)
	}
	e.copies.Wait()
	e.closeAll()
}

func (e *Exec) closeAll() {
	e.Started()
	for _, r := range e.outputs {
		r.Close()
	}
	e.outputs = nil
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stdinW != nil {
		e.stdinW.Close()
		e.stdinW = nil
	}
}

// runscFailed is runsc's exit status when it fails itself (it reports an
// exec it could not do, or a wait that failed, on its stderr).
const runscFailed = 128

// Exit codes podman exec gives for a failed exec, which lazaret keeps.
const (
	ExitExecFailed = 125
	ExitCannotExec = 126
	ExitNotFound   = 127
)

// Result maps runsc's exit code to podman exec's: a command that ran
// returns its own code (128+n when killed by signal n); runsc failing
// itself, exit 128 with a message, becomes 127 (command not found), 126
// (not executable) or 125 (the exec failed: the container is gone, …),
// as podman maps the runtime's message. msg is what runsc wrote, for the
// user.
func (e *Exec) Result(code int) (mapped int, msg string) {
	msg = strings.TrimSpace(e.stderr.String())
	if code != runscFailed || msg == "" {
		return code, msg
	}
	return classify(msg), msg
}

func classify(msg string) int {
	low := strings.ToLower(msg)
	if strings.Contains(low, "executing command") {
		switch {
		case strings.Contains(low, "no such file or directory"), strings.Contains(low, "not found"):
			return ExitNotFound
		case strings.Contains(low, "permission denied"):
			return ExitCannotExec
		}
	}
	return ExitExecFailed
}
