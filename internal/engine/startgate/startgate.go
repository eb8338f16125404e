// Package startgate lets the agent container's `podman run -d` begin while
// the coordinator's components are still making what its mounts point at
// (the State Anchor's overlays): podman's own work before it calls the
// runtime (≈ 130 ms, measured) then overlaps theirs. The runsc shim holds
// `runsc create` — the first step that opens a mount's source — at the
// gate until the coordinator says the sources are ready, and fails the
// create when they are not.
//
// The gate fails closed: a container whose spec names a gate is never
// created unless the coordinator answered "ok" on that gate; a refused
// peer, a closed gate, a dead coordinator or an unreadable spec all fail
// the create.
package startgate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lazaret-dev/lazaret/internal/unixsock"
)

// Annotation names the gate's socket in the container's OCI spec. Only the
// coordinator sets it (podman run --annotation); the sandbox cannot.
const Annotation = "dev.lazaret.start-gate"

const (
	answerOK   = "ok"
	answerFail = "fail"
	// maxAnswer bounds the answer line the shim reads.
	maxAnswer = 4096
)

// ErrClosed is what a waiting create is told when the gate closes before
// the coordinator opened it.
var ErrClosed = errors.New("start gate closed before the sandbox's mounts were ready")

// Gate is the coordinator's end: a UNIX socket that answers every
// connection of the user's own processes, once Open has been called, with
// the outcome given to Open.
type Gate struct {
	ln   *net.UnixListener
	path string

	once   sync.Once
	opened chan struct{}
	err    error

	closeOnce sync.Once
	wg        sync.WaitGroup
	passed    atomic.Int32 // creates answered ok
}

// Listen makes the gate's socket at path (a socket already there, left by a
// dead coordinator, is removed first: path is in the user's private
// runtime directory).
func Listen(path string) (*Gate, error) {
	ln, err := unixsock.ListenReplacing(path)
	if err != nil {
		return nil, fmt.Errorf("start gate: %w", err)
	}
	g := &Gate{ln: ln, path: path, opened: make(chan struct{})}
	g.wg.Add(1)
	go g.serve()
	return g, nil
}

// Path is the socket's path, the value of the spec's Annotation.
func (g *Gate) Path() string { return g.path }

// Open answers every waiting and later create: ok when err is nil, else
// a failure naming err. Only the first call counts.
func (g *Gate) Open(err error) {
	g.once.Do(func() {
		g.err = err
		close(g.opened)
	})
}

// Passed is how many creates the gate let through. A run that succeeded
// although none did was not held: its runtime is not lazaret's shim.
func (g *Gate) Passed() int { return int(g.passed.Load()) }

// Close stops answering, tells a create still waiting that the gate
// closed (ErrClosed, unless Open came first), and removes the socket.
func (g *Gate) Close() error {
	g.Open(ErrClosed)
	var err error
	g.closeOnce.Do(func() {
		err = g.ln.Close()
		g.wg.Wait()
		if rerr := os.Remove(g.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	})
	return err
}

func (g *Gate) serve() {
	defer g.wg.Done()
	for {
		nc, err := g.ln.Accept()
		if err != nil {
			return // closed
		}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer nc.Close()
			cred, err := unixsock.PeerCred(nc)
			if err != nil || int(cred.Uid) != os.Getuid() {
				return // another user's process never learns anything
			}
			<-g.opened
			line := answerOK
			if g.err != nil {
				line = answerFail + " " + oneLine(g.err.Error())
			}
			_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := nc.Write([]byte(line + "\n")); err == nil && g.err == nil {
				g.passed.Add(1)
			}
		}()
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > maxAnswer-len(answerFail)-2 {
		s = s[:maxAnswer-len(answerFail)-2]
	}
	return s
}

// Wait is the shim's end: it connects to the gate at path and returns nil
// only when the coordinator answered ok.
func Wait(ctx context.Context, path string) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("start gate: %w", err)
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetReadDeadline(dl)
	}
	line, err := bufio.NewReaderSize(nc, maxAnswer).ReadString('\n')
	if err != nil {
		return fmt.Errorf("start gate: the coordinator gave no answer (%v)", err)
	}
	line = strings.TrimSuffix(line, "\n")
	if line == answerOK {
		return nil
	}
	if msg, ok := strings.CutPrefix(line, answerFail+" "); ok {
		return fmt.Errorf("start gate: %s", msg)
	}
	return fmt.Errorf("start gate: unexpected answer %q", line)
}

// FromBundle returns the gate named by the OCI spec in bundle
// (bundle/config.json), "" when it names none. An unreadable spec is an
// error: whether to wait cannot be told.
func FromBundle(bundle string) (string, error) {
	return SpecAnnotation(bundle, Annotation)
}

// SpecAnnotation returns the annotation key of the OCI spec in bundle, ""
// when it has none.
func SpecAnnotation(bundle, key string) (string, error) {
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return "", fmt.Errorf("start gate: %w", err)
	}
	var spec struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		return "", fmt.Errorf("start gate: %s: %w", filepath.Join(bundle, "config.json"), err)
	}
	return spec.Annotations[key], nil
}
