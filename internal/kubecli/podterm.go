package kubecli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
	"github.com/lazaret-dev/lazaret/internal/wire/podkeep"
)

// A kept cluster session's command runs under a terminal keeper in the
// pod (internal/insandbox/podkeep), not on the exec's own TTY: the exec
// is only a link to it. When the link is lost (the laptop sleeps, its
// network changes) the command goes on in the pod, its output kept
// there; this process links again and gets every byte it missed
// (docs/KUBERNETES.md, "When the laptop closes"). Prompts are still drawn
// here, on the user's terminal.

// Re-linking: quickly at first (a blip), then every relinkMax while the
// cluster is out of reach.
const (
	relinkFirst = time.Second
	relinkMax   = 10 * time.Second
	// hangupWait bounds the wait for the command's end after a hang-up.
	hangupWait = 10 * time.Second
	// linkUp is how long a new link must hold to count as back.
	linkUp = 3 * time.Second
)

// relinkBackoff is the wait before the next link: relinkFirst after a
// link that held (a new loss), then doubled up to relinkMax.
type relinkBackoff struct{ wait time.Duration }

func (b *relinkBackoff) next(held bool) time.Duration {
	if held || b.wait == 0 {
		b.wait = relinkFirst
	} else {
		b.wait = min(2*b.wait, relinkMax)
	}
	return b.wait
}

// errLeft is a kept session this process left running in its pod
// (SIGTERM), to be taken back (resume.go).
var errLeft = errors.New("left running in the pod")

// isClosed reports whether c is closed (false for nil).
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// errKeeperGone is the pod's keeper gone with the command's exit unknown
// (the pod restarted, or the agent killed it).
var errKeeperGone = errors.New("the session's terminal keeper in the pod is gone")

// podTermDir is a session's keeper directory in the pod.
func podTermDir(id string) string { return path.Join(escRunDir, id+".term") }

// podTerm is one kept session's terminal through the pod's keeper.
type podTerm struct {
	g      *globals
	c      *kube.Client
	pod    string
	dir    string
	client podkeep.Client
	keys   chan []byte
	sizes  chan podkeep.Size
	hangup chan struct{}
	// notice writes one line to the user's terminal (through the keeper
	// on this machine, which keeps it on the session's screen).
	notice func(string)
}

// runPodTerm runs command in pod under the keeper and returns its exit
// code, re-linking until it ends or the pod is gone. hangup (SIGTERM,
// SIGHUP: the local keeper ended the session) hangs the command up in
// the pod, on the next link if none is up; hangupWait later this gives up.
func (g *globals) runPodTerm(c *kube.Client, r podTermRequest) (int, error) {
	pod, in, out, hangup := r.pod, r.in, r.out, r.hangup
	p := &podTerm{g: g, c: c, pod: pod, dir: podTermDir(r.id), client: podkeep.Client{Out: out},
		keys: make(chan []byte), sizes: make(chan podkeep.Size, 1), hangup: make(chan struct{}),
		notice: func(s string) { _, _ = fmt.Fprintf(out, "\r\n%s\r\n", s) }}
	linkState := func(lost bool) {
		if r.linkState != nil {
			r.linkState(lost)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-hangup:
		case <-r.leave:
			cancel()
			return
		case <-ctx.Done():
			return
		}
		close(p.hangup)
		select {
		case <-time.After(hangupWait):
			cancel()
		case <-ctx.Done():
		}
	}()
	go readKeys(in, p.keys)
	go convertSizes(r.sizes, p.sizes)
	argv := podkeep.RunArgv(escrelay.BinGoClient, p.dir, r.command)
	if r.resume {
		argv = podkeep.AttachArgv(escrelay.BinGoClient, p.dir)
	}
	told := false
	var backoff relinkBackoff
	for {
		before, began := p.client.Offset, time.Now()
		var up *time.Timer
		if told { // a link that holds linkUp carries the session again
			up = time.AfterFunc(linkUp, func() { linkState(false) })
		}
		code, ended, err := p.link(ctx, argv)
		if up != nil {
			up.Stop()
		}
		switch {
		case ended:
			return code, nil
		case errors.Is(err, errKeeperGone):
			return 0, err
		case isClosed(r.leave):
			return 0, errLeft
		case ctx.Err() != nil:
			return 0, context.Canceled // hung up, its end not seen
		}
		argv = podkeep.AttachArgv(escrelay.BinGoClient, p.dir)
		if gone := podGone(ctx, p.c, p.pod); gone != nil {
			return 0, gone
		}
		held := p.client.Offset != before || time.Since(began) > relinkMax
		if held {
			told = false // that link worked: a new loss
		}
		if !told { // once per loss, not per try
			linkState(true)
			p.notice(fmt.Sprintf("lazaret: lost the link to pod %s (%s); the session goes on there, linking again...", pod, linkErr(err)))
			told = true
		}
		select {
		case <-time.After(backoff.next(held)):
		case <-ctx.Done():
			return 0, context.Canceled
		}
	}
}

// podTermRequest is one kept session's command and terminal.
type podTermRequest struct {
	pod, id string
	command []string
	// resume links to the keeper already running the session (a
	// session taken back) from its first kept byte, instead of starting
	// command.
	resume bool
	in     io.Reader
	out    io.Writer
	sizes  <-chan kube.TermSize
	hangup <-chan struct{}
	// leave, closed, ends this process's part and leaves the command
	// running under the pod's keeper (errLeft).
	leave <-chan struct{}
	// linkState, when set, is told when the link is lost and when a
	// new one carries the session again (ps shows it).
	linkState func(lost bool)
}

// link runs one link: an exec of argv carrying the keeper's frames.
func (p *podTerm) link(ctx context.Context, argv []string) (int, bool, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	type result struct {
		code int
		err  error
	}
	exited := make(chan result, 1)
	go func() {
		code, err := p.c.ExecIn(lctx, kube.ExecRequest{Pod: p.pod, Container: kubespec.ContainerName,
			Command: argv, Stdin: inR, Stdout: outW, Stderr: logWriter{p.g}})
		_ = outW.CloseWithError(errors.Join(err, io.EOF))
		_ = inR.Close()
		exited <- result{code, err}
	}()
	code, ended, err := p.client.Serve(lctx, inW, outR, p.keys, p.sizes, p.hangup)
	cancel()
	_ = inW.Close()
	_ = outR.Close()
	r := <-exited
	if !ended && r.err == nil && r.code == podkeep.ExitNoSession {
		return 0, false, errKeeperGone
	}
	if !ended && r.err != nil {
		err = r.err
	}
	return code, ended, err
}

// podGone is a non-nil error when the pod no longer exists (stop, or the
// claim deleted): nothing is left to link to. A cluster out of reach is
// not gone.
func podGone(ctx context.Context, c *kube.Client, pod string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.Pod(cctx, pod)
	if errors.Is(err, kube.ErrNotFound) {
		return fmt.Errorf("pod %s is gone: the session ended with it", pod)
	}
	return nil
}

// readKeys copies the terminal's keys to keys until in ends.
func readKeys(in io.Reader, keys chan<- []byte) {
	defer close(keys)
	buf := make([]byte, 32<<10)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			keys <- append([]byte(nil), buf[:n]...)
		}
		if err != nil {
			return
		}
	}
}

// convertSizes passes the terminal's sizes on, the newest winning.
func convertSizes(in <-chan kube.TermSize, out chan podkeep.Size) {
	for s := range in {
		select {
		case <-out:
		default:
		}
		out <- podkeep.Size{Rows: s.Height, Cols: s.Width}
	}
}

// linkErr is why a link ended, on one line and escaped for the notice
// (the text may carry the API server's or the pod's words).
func linkErr(err error) string {
	if err == nil {
		return "the stream ended"
	}
	return visible.Line(oneLine(err))
}
