package fsmonitor

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Paths inside the sandbox.
const (
	DefaultRoot   = "/workspace"
	DefaultSocket = "/run/lazaret/fsmonitor/daemon.sock"
)

// hookTimeout bounds a query: a daemon that does not answer in time costs
// git a full scan, never a hang.
const hookTimeout = 5 * time.Second

// Ask sends one request to the daemon at socket and returns its whole
// answer, checked; any failure is an error.
func Ask(socket string, r Request) ([]byte, error) {
	req, err := EncodeRequest(r)
	if err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("unix", socket, hookTimeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(hookTimeout))
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	return ReadFrame(bufio.NewReader(c))
}

// Hook is core.fsmonitor: git runs it as `<hook> 2 <token>` in the work
// tree's top level and reads the answer from stdout. Whatever goes wrong,
// the answer is "/" with a token the daemon will not accept, so git
// checks everything now and next time. A protocol other than 2 exits 1
// (git then checks everything too).
func Hook(args []string, socket string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != HookVersion {
		io.WriteString(stderr, "lazaret-fsmonitor: git fsmonitor hook protocol 2 only (core.fsmonitorHookVersion = 2)\n")
		return 1
	}
	ans, err := query(socket, args[1])
	if err != nil {
		ans = FullAnswer(FallbackToken)
	}
	if _, err := stdout.Write(ans); err != nil {
		return 1
	}
	return 0
}

func query(socket, token string) ([]byte, error) {
	dir, err := syscall.Getwd()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("no working directory")
	}
	return Ask(socket, Request{Dir: dir, Token: token})
}
