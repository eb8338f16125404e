package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// TermSize is a terminal's size in cells.
type TermSize struct{ Width, Height uint16 }

// ExecRequest is one command in one container of a pod.
type ExecRequest struct {
	Namespace string // set by Client.ExecIn
	Pod       string
	Container string
	Command   []string
	// Stdin nil means the command's stdin is closed at once.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	// Sizes, with TTY, delivers the terminal's size, first at start and
	// then on every change; closed when the session ends.
	Sizes <-chan TermSize
}

// Executor runs a command in a pod and returns its exit code. An error is
// a failure to run it at all (a *StartError when the container refused
// the command itself).
type Executor interface {
	Exec(ctx context.Context, r ExecRequest) (int, error)
}

// StartError is a command the container could not start: Code is 127
// when it does not exist, 126 when it cannot be executed, as a shell
// (and podman exec) says.
type StartError struct {
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// apiExecutor runs commands through the API server's pods/exec
// subresource: WebSocket first, SPDY for older servers, like kubectl.
type apiExecutor struct {
	cfg  *rest.Config
	core kubernetes.Interface
}

// ExecIn runs r in a pod of c's namespace.
func (c *Client) ExecIn(ctx context.Context, r ExecRequest) (int, error) {
	r.Namespace = c.Namespace
	return c.Exec.Exec(ctx, r)
}

func (x *apiExecutor) Exec(ctx context.Context, r ExecRequest) (int, error) {
	ns := r.Namespace
	req := x.core.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(r.Pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: r.Container, Command: r.Command,
			Stdin: r.Stdin != nil, Stdout: r.Stdout != nil, Stderr: r.Stderr != nil && !r.TTY, TTY: r.TTY,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(x.cfg, "GET", req.URL().String())
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(x.cfg, "POST", req.URL())
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	exe, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	opts := remotecommand.StreamOptions{Stdin: r.Stdin, Stdout: r.Stdout, Tty: r.TTY}
	if !r.TTY {
		opts.Stderr = r.Stderr
	}
	if r.TTY && r.Sizes != nil {
		opts.TerminalSizeQueue = sizeQueue(r.Sizes)
	}
	return ExitCode(exe.StreamWithContext(ctx, opts))
}

type sizeQueue <-chan TermSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
}

// ExitCode turns the result of an exec stream into the command's exit
// code: the code it exited with, 127/126 (a *StartError) when the runtime
// could not start it, else the error.
func ExitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	if code := startFailure(err.Error()); code != 0 {
		return code, &StartError{Code: code, Err: err}
	}
	return 0, wrap("exec", err, false)
}

// startFailure recognises the runtime's message for a command it could
// not start (runc: `exec: "x": executable file not found in $PATH`;
// runsc: "no such file or directory", "permission denied").
func startFailure(msg string) int {
	m := strings.ToLower(msg)
	if !strings.Contains(m, "exec") {
		return 0
	}
	switch {
	case strings.Contains(m, "executable file not found"), strings.Contains(m, "no such file or directory"):
		return 127
	case strings.Contains(m, "permission denied"), strings.Contains(m, "exec format error"), strings.Contains(m, "is a directory"):
		return 126
	}
	return 0
}
