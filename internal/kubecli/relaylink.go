package kubecli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// The escalation relay in the pod outlives its link as the terminal
// keeper does: a request the agent makes while this machine is away
// waits there, and a connection in flight goes on, byte for byte, once
// this process links again (internal/wire/escrelay, Resume).

// endWait bounds the wait for the relay's end after End.
const endWait = 2 * time.Second

// relayLinks keeps host linked to the relay of dir in pod until ctx
// ends or stop is closed: the first link must be up within
// relayStartTimeout, later ones are retried while the pod exists. done
// is closed when it stops.
func (g *globals) relayLinks(ctx context.Context, c *kube.Client, pod, dir string, host *escrelay.Host, stop <-chan struct{}, done chan<- struct{}) error {
	first := make(chan error, 1)
	go func() {
		defer close(done)
		var backoff relinkBackoff
		for n := 0; ; n++ {
			began := time.Now()
			err := g.relayLink(ctx, c, pod, dir, host)
			select {
			case <-host.Ready():
			default:
				first <- fmt.Errorf("escalation relay in pod %s ended before it listened: %w", pod, errors.Join(err, errors.New("no socket")))
				return
			}
			select {
			case <-stop:
				return // the session ended: never start a relay again
			default:
			}
			if ctx.Err() != nil {
				return
			}
			if gone := podGone(ctx, c, pod); gone != nil {
				g.log.Warn("escalation relay", "err", gone)
				return
			}
			g.log.Debug("escalation relay link lost, linking again", "err", err, "try", n)
			select {
			case <-time.After(backoff.next(time.Since(began) > relinkMax)):
			case <-ctx.Done():
				return
			case <-stop:
				return
			}
		}
	}()
	select {
	case <-host.Ready():
		return nil
	case err := <-first:
		return err
	case <-time.After(relayStartTimeout):
		return fmt.Errorf("escalation relay in pod %s: no socket after %s", pod, relayStartTimeout)
	}
}

// relayLink runs one link: an exec of the relay's bridge carrying the
// frames, until either end closes it.
func (g *globals) relayLink(ctx context.Context, c *kube.Client, pod, dir string, host *escrelay.Host) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	exited := make(chan error, 1)
	go func() {
		_, err := c.ExecIn(lctx, kube.ExecRequest{Pod: pod, Container: kubespec.ContainerName,
			Command: []string{escrelay.BinGoClient, escrelay.Verb, dir}, Stdin: inR, Stdout: outW, Stderr: logWriter{g}})
		_ = outW.CloseWithError(errors.Join(err, io.EOF))
		_ = inR.Close()
		exited <- err
	}()
	err := host.Link(inW, outR)
	cancel()
	_ = inW.Close()
	_ = outR.Close()
	return errors.Join(err, <-exited)
}
