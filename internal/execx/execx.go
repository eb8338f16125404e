// Package execx is what the adapters of outside programs (internal/adapter/podman,
// internal/adapter/hostgit) share: running a prepared command with its output
// captured, a bounded buffer for stderr, and the last line of a message.
// It runs nothing by itself and knows no program.
package execx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Output starts cmd with stdin r and returns its stdout and stderr. cmd's
// extra descriptors are closed in this process once the child holds them
// (an --env-file pipe must not stay open here). err is cmd's own: an
// *exec.ExitError for a non-zero exit, see ExitCode.
func Output(cmd *exec.Cmd, r io.Reader) (stdout []byte, stderr string, err error) {
	var out, errb bytes.Buffer
	cmd.Stdin = r
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err = cmd.Start()
	for _, f := range cmd.ExtraFiles {
		_ = f.Close()
	}
	if err == nil {
		err = cmd.Wait()
	}
	return out.Bytes(), errb.String(), err
}

// ExitCode is the exit status err carries when the program ran and
// exited non-zero; ok is false for any other error.
func ExitCode(err error) (code int, ok bool) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), true
	}
	return 0, false
}

// ShellExitCode is a finished process's end as a shell reports it: its
// exit code, 128+N for signal N, 1 for a failure to wait at all.
func ShellExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// Wrap is the error of a finished run: nil for success, exited(code) for
// a non-zero exit, missing when the program is not installed, else err
// prefixed with what.
func Wrap(err error, exited func(code int) error, missing error, what string) error {
	if err == nil {
		return nil
	}
	if code, ok := ExitCode(err); ok {
		return exited(code)
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return missing
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Failure is a program's non-zero exit: its arguments, its status and
// its stderr.
type Failure struct {
	Args     []string
	ExitCode int
	Stderr   string
}

// Message is "prog verb: " and the last line of stderr, or the exit status
// when stderr is empty.
func (f *Failure) Message(prog, verb string) string {
	if msg := LastLine(f.Stderr); msg != "" {
		return fmt.Sprintf("%s %s: %s", prog, verb, msg)
	}
	return fmt.Sprintf("%s %s: exit status %d", prog, verb, f.ExitCode)
}

// LastLine is the last non-blank line of s, trimmed: where programs put
// the message that matters.
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	return s
}

// TailBuffer keeps the last Max bytes written (16 KiB when Max is 0): a
// program's stderr for an error message, bounded whatever it writes.
type TailBuffer struct {
	Max int
	b   []byte
}

func (t *TailBuffer) Write(p []byte) (int, error) {
	limit := t.Max
	if limit <= 0 {
		limit = 16 << 10
	}
	t.b = append(t.b, p...)
	if len(t.b) > limit {
		t.b = t.b[len(t.b)-limit:]
	}
	return len(p), nil
}

func (t *TailBuffer) String() string { return string(t.b) }
