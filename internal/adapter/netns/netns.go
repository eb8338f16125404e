// Package netns is the adapter of a sandbox's pinned network namespace and
// its uplink: the namespace is made, unpinned, checked and cut off with
// unshare, umount, stat and ip (through nsenter) in podman's user and mount
// namespace (internal/adapter/userns), and slirp4netns gives it its connection to
// the outside. The only package that runs slirp4netns or enters a
// sandbox's network namespace.
package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/adapter/userns"
	"github.com/lazaret-dev/lazaret/internal/execx"
)

// A pinned network namespace lets several containers be started into the
// same namespace at once (--network ns:<path>): joining a container's
// namespace (--network container:<name>) would make one container wait for
// the other's start. The namespace is owned by podman's user namespace and
// pinned by a bind mount in podman's mount namespace; it has only loopback
// until an Uplink is attached.

// Client runs the namespace's programs for a podman user.
type Client struct {
	ns userns.Runner
	pc *podman.Client
}

// New is the Client of pc's podman.
func New(pc *podman.Client) *Client { return &Client{ns: userns.New(pc), pc: pc} }

func (c *Client) logger() *slog.Logger {
	if c.pc.Log != nil {
		return c.pc.Log
	}
	return slog.New(slog.DiscardHandler)
}

// netnsCreateScript pins a new network namespace at $1, first removing
// whatever a crashed predecessor left there.
const netnsCreateScript = `set -eu
umount -- "$1" 2>/dev/null || true
if [ -L "$1" ] || { [ -e "$1" ] && [ ! -f "$1" ]; }; then rm -rf -- "$1"; fi
[ -e "$1" ] || : > "$1"
exec unshare --net="$1" true
`

// netnsRemoveScript unpins the namespace at $1 and removes the file.
const netnsRemoveScript = `umount -- "$1" 2>/dev/null
rm -f -- "$1"
`

// Reserve makes the empty file a namespace is later pinned on, so
// that a container spec can name it (podman only checks that the path
// exists; the runtime joins the namespace at create, and fails on the
// plain file). An existing regular file is kept: it may carry a crashed
// predecessor's pin, which Create replaces.
func Reserve(path string) error {
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("network namespace path %q is not absolute", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("reserving the network namespace %s: %w", path, err)
	}
	return f.Close()
}

// Create pins a new, empty network namespace at path (a file in a
// private directory; it must not be under a shared mount).
func (c *Client) Create(ctx context.Context, path string) error {
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("network namespace path %q is not absolute", path)
	}
	if _, err := c.ns.Run(ctx, "sh", "-c", netnsCreateScript, "netns-create", path); err != nil {
		return fmt.Errorf("creating the network namespace %s: %w", path, err)
	}
	return nil
}

// Remove unpins the namespace at path; it is freed when its last
// process exits. A path that is not pinned is not an error.
func (c *Client) Remove(ctx context.Context, path string) error {
	if _, err := c.ns.Run(ctx, "sh", "-c", netnsRemoveScript, "netns-remove", path); err != nil {
		return fmt.Errorf("removing the network namespace %s: %w", path, err)
	}
	return nil
}

// Pinned reports whether a namespace is pinned at path, as seen in
// podman's mount namespace where the pins are (a file that merely exists
// is not a pin: a crashed start's, or one whose pin went with podman's
// namespaces).
func (c *Client) Pinned(ctx context.Context, path string) (bool, error) {
	out, err := c.ns.Run(ctx, "stat", "-f", "-c", "%T", "--", path)
	if err != nil {
		return false, fmt.Errorf("checking the network namespace pin %s: %w", path, err)
	}
	return strings.TrimSpace(string(out)) == "nsfs", nil
}

// Uplink is a slirp4netns process giving a pinned network namespace its
// connection to the outside, as podman does for --network slirp4netns: a
// tap0 with 10.0.2.100/24 (and fd00::100/64), the resolver at 10.0.2.3,
// the host's loopback unreachable.
type Uplink struct {
	cmd  *exec.Cmd
	exit *os.File // closing it stops slirp4netns; so does our death
	done chan struct{}
	log  *syncBuffer
}

// UplinkOptions configure StartUplink.
type UplinkOptions struct {
	IPv6 bool
	// Timeout bounds the wait for slirp4netns to configure tap0; 10 s
	// when zero.
	Timeout time.Duration
}

// StartUplink attaches slirp4netns to the namespace pinned at path and
// returns once tap0 is configured. slirp4netns runs in podman's user and
// mount namespaces (where the pin is), with its own sandbox and seccomp
// filter, and exits when Stop is called or this process dies.
func (c *Client) StartUplink(ctx context.Context, path string, o UplinkOptions) (*Uplink, error) {
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	cmd, ok := c.ns.JoinCommand(uplinkArgv(path, o)...)
	if !ok {
		return nil, errors.New("uplink: podman's pause process is not running")
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer readyR.Close()
	exitR, exitW, err := os.Pipe()
	if err != nil {
		readyW.Close()
		return nil, err
	}
	u := &Uplink{exit: exitW, done: make(chan struct{}), log: &syncBuffer{}}
	u.cmd = cmd
	u.cmd.ExtraFiles = []*os.File{readyW, exitR}
	u.cmd.Stdout, u.cmd.Stderr = u.log, u.log
	c.logger().Debug("slirp4netns", "netns", path)
	err = u.cmd.Start()
	readyW.Close()
	exitR.Close()
	if err != nil {
		exitW.Close()
		return nil, fmt.Errorf("uplink: %w", err)
	}
	go func() {
		u.cmd.Wait()
		close(u.done)
	}()
	ready := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		_, err := io.ReadFull(readyR, b)
		ready <- err
	}()
	timer := time.NewTimer(o.Timeout)
	defer timer.Stop()
	select {
	case err = <-ready:
		if err != nil {
			err = fmt.Errorf("slirp4netns exited before configuring tap0: %s", lastLogLine(u.log.String()))
		}
	case <-timer.C:
		err = fmt.Errorf("slirp4netns did not configure tap0 within %v: %s", o.Timeout, lastLogLine(u.log.String()))
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		u.Stop()
		return nil, fmt.Errorf("uplink: %w", err)
	}
	return u, nil
}

// cutScript deletes every interface of the namespace but loopback.
const cutScript = `ip -br link | while read -r name _; do
	name=${name%%@*}
	[ "$name" = lo ] || ip link del dev "$name" || exit 1
done
`

// Cut deletes every interface but loopback of the namespace pinned at
// path: nothing of it reaches out any more. On failure the error comes
// with what the deletion printed.
func (c *Client) Cut(ctx context.Context, path string) (output string, err error) {
	out, err := c.ns.Run(ctx, "nsenter", "--net="+path, "sh", "-c", cutScript)
	return string(out), err
}

// uplinkArgv is slirp4netns's command line for the namespace at path: the
// ready descriptor is 3, the exit descriptor 4 (StartUplink's ExtraFiles).
func uplinkArgv(path string, o UplinkOptions) []string {
	args := []string{"slirp4netns",
		"--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox", "--enable-seccomp",
		"--ready-fd=3", "--exit-fd=4"}
	if o.IPv6 {
		args = append(args, "--enable-ipv6")
	}
	return append(args, "--netns-type=path", path, "tap0")
}

// Done is closed when slirp4netns has exited (stopped or died).
func (u *Uplink) Done() <-chan struct{} { return u.done }

// LastLine is the last line slirp4netns wrote, for an error message.
func (u *Uplink) LastLine() string { return lastLogLine(u.log.String()) }

// Stop ends slirp4netns: the exit descriptor is closed, then SIGKILL after
// 2 s. Safe to call more than once.
func (u *Uplink) Stop() {
	if u == nil {
		return
	}
	u.exit.Close()
	select {
	case <-u.done:
	case <-time.After(2 * time.Second):
		u.cmd.Process.Kill()
		<-u.done
	}
}

func lastLogLine(s string) string {
	if l := execx.LastLine(s); l != "" {
		return l
	}
	return "no output"
}

// syncBuffer is an execx.TailBuffer safe for the writer goroutine of exec.Cmd
// and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  execx.TailBuffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
